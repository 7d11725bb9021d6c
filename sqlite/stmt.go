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
}

func (c *stmtCache) get(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	st, err := c.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	c.stmts[query] = st
	return st, nil
}

// cachedQuerier runs statements from a stmtCache on the pool, or bound to
// tx when it is set. A statement that fails to prepare (a table not migrated
// yet) runs unprepared, which reports the same error.
type cachedQuerier struct {
	cache *stmtCache
	tx    *sql.Tx
}

func (q cachedQuerier) stmt(ctx context.Context, query string) *sql.Stmt {
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
