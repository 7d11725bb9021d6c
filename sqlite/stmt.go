package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// querier is what the executor's methods run statements on.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// stmtCache prepares each statement the driver runs once per database, so
// that SQLite parses and plans it once per connection rather than on every
// call; for a queue's short statements that is a large part of the cost.
type stmtCache struct {
	db    *sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
	// preparing holds the queries cached is preparing in the background.
	preparing map[string]bool
}

// cached returns the statement prepared for query, or nil when there is
// none yet; then it prepares one in the background, on a connection of the
// pool when one is free, for the calls after this one. It never waits for
// a connection: reserved connections (OpenReserved) use it, which must run
// while the pool is exhausted.
func (c *stmtCache) cached(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st
	}
	if c.preparing == nil {
		c.preparing = map[string]bool{}
	}
	// Only on an idle connection: opening one just to prepare would also
	// open the database files, even as the application closes the pool.
	if !c.preparing[query] && c.db.Stats().Idle > 0 {
		c.preparing[query] = true
		go func() {
			_, _ = c.get(context.Background(), query) // fails once the DB is closed
			c.mu.Lock()
			delete(c.preparing, query)
			c.mu.Unlock()
		}()
	}
	return nil
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	st, ok := c.stmts[query]
	c.mu.Unlock()
	if ok {
		return st, nil
	}
	// Prepare outside the lock: it waits for a connection of the pool,
	// and cached must not wait behind it.
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[query]; ok {
		st.Close() //nolint:errcheck // a concurrent prepare won; this one is not needed
		return prev, nil
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	c.stmts[query] = st
	return st, nil
}

// cachedQuerier runs statements from a stmtCache on the pool, or bound to
// tx when it is set. A statement that fails to prepare (a table not migrated
// yet) runs unprepared, which reports the same error. With conn set, q runs
// on that reserved connection (OpenReserved), or in tx begun on it.
type cachedQuerier struct {
	cache *stmtCache
	tx    *sql.Tx
	conn  *sql.Conn
}

func (q cachedQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
	if q.tx != nil || q.conn != nil {
		// A transaction, which may hold the write lock, or a reserved
		// connection never waits for a connection of the pool, as
		// preparing on the database would: a statement the cache already
		// holds is bound to the transaction (prepared on its connection
		// once); otherwise, and outside a transaction on a reserved
		// connection (database/sql cannot bind a statement to a
		// *sql.Conn), the statement runs unprepared.
		st := q.cache.cached(query)
		if st == nil || q.tx == nil {
			return nil
		}
		return q.tx.StmtContext(ctx, st)
	}
	st, err := q.cache.get(ctx, query)
	if err != nil {
		return nil
	}
	if q.tx != nil {
		// Bound statements are closed with the transaction.
		return q.tx.StmtContext(ctx, st)
	}
	return st
}

func (q cachedQuerier) plain() querier {
	if q.tx != nil {
		return q.tx
	}
	if q.conn != nil {
		return q.conn
	}
	return q.cache.db
}

func (q cachedQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return q.plain().ExecContext(ctx, query, args...)
}

func (q cachedQuerier) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return q.plain().QueryContext(ctx, query, args...)
}

func (q cachedQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := q.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return q.plain().QueryRowContext(ctx, query, args...)
}
