package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// nowExpr is the database clock. UTC_TIMESTAMP does not depend on the session
// time zone, and holds still within one statement.
const nowExpr = "UTC_TIMESTAMP(6)"

// nowSQL reads the database clock.
const nowSQL = "SELECT " + nowExpr

// querier is what the executor's methods run statements on: the pool or a
// transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// maxTxAttempts bounds the retries of a write the driver runs in its own
// transaction when InnoDB rolls it back as a deadlock victim.
const maxTxAttempts = 5

// executor implements driver.Executor on a querier.
type executor struct {
	d *Driver
	// q is the pool or a transaction.
	q querier
	// onPool is set when q is the pool: each write of several statements then
	// runs in its own transaction. Otherwise it runs under a savepoint in q.
	onPool bool
	// conn, on an executor of reserved connections (OpenReserved), is the
	// connection q is: the pool's own transactions begin on it. Nil on the
	// driver's pool.
	conn *sql.Conn
	// tx is the state of the transaction the driver started for q, nil on
	// the pool and in a user's transaction.
	tx *sqlbackend.Tx
	// driverTx is set when tx's outermost transaction is one the driver
	// began on its pool, as READ COMMITTED; a savepoint in it inherits the
	// flag. Its caller (the client) rolls it back after an error from any
	// method. In a user's transaction the level is the user's.
	driverTx bool
}

var _ driver.Executor = (*executor)(nil)

// open returns driver.ErrClosed once the executor's transaction, or one it is
// nested in, has ended.
func (e *executor) open() error { return e.tx.Open() }

// read returns the querier for a statement that needs no transaction of its
// own (a read, or a write of one statement), or driver.ErrClosed.
func (e *executor) read() (querier, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	return e.q, nil
}

// beginPool starts a READ COMMITTED database/sql transaction on the pool
// (or on the executor's reserved connection): Begin's, and the driver's own
// on a *sql.DB without multi-statement support (elsewhere those are
// connTx). READ COMMITTED keeps locking reads from taking gap locks, which
// would hold up inserts into a queue while a claim is in flight.
func (e *executor) beginPool(ctx context.Context) (*sql.Tx, error) {
	opts := &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	var tx *sql.Tx
	var err error
	if e.conn != nil {
		tx, err = e.conn.BeginTx(ctx, opts)
	} else {
		tx, err = e.d.db.BeginTx(ctx, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", translateError(err))
	}
	return tx, nil
}

// write runs fn atomically: on the pool in a transaction of its own, retried
// when InnoDB rolls it back as a deadlock victim; in a transaction under a
// savepoint. fn must not keep q, and may run more than once.
func (e *executor) write(ctx context.Context, fn func(q querier) error) error {
	return e.writeEnd(ctx, func(q querier) ([]stmt, error) { return nil, fn(q) })
}

// writeEnd is write for a fn that leaves its last statements to writeEnd,
// which runs them after fn: in one of the driver's own transactions
// (connTx) together with the COMMIT, in one round trip; elsewhere one after
// the other. They must not need their results (the COMMIT's come back).
func (e *executor) writeEnd(ctx context.Context, fn func(q querier) ([]stmt, error)) error {
	if err := e.open(); err != nil {
		return err
	}
	if !e.onPool {
		return e.d.withSavepoint(ctx, e.q, func(q querier) error { return runEnd(ctx, q, fn) })
	}
	multi, err := e.d.multiStatements(ctx, e.q)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if multi {
			err = e.connWrite(ctx, fn)
		} else {
			err = e.sqlTxWrite(ctx, fn)
		}
		if err == nil || !isDeadlock(err) || attempt == maxTxAttempts || ctx.Err() != nil {
			return err
		}
	}
}

// runEnd runs fn and then the last statements it returns on q.
func runEnd(ctx context.Context, q querier, fn func(q querier) ([]stmt, error)) error {
	last, err := fn(q)
	if err != nil {
		return err
	}
	return execEach(ctx, q, last)
}

// connWrite runs fn once in a connTx: on the executor's reserved
// connection, or on one taken from the pool for it.
func (e *executor) connWrite(ctx context.Context, fn func(q querier) ([]stmt, error)) error {
	conn := e.conn
	if conn == nil {
		c, err := e.d.db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("begin transaction: %w", translateError(err))
		}
		defer c.Close()
		conn = c
	}
	tx := &connTx{conn: conn}
	last, err := fn(tx)
	if err == nil {
		if err = tx.commit(ctx, last); err != nil {
			err = fmt.Errorf("commit: %w", translateError(err))
		}
	}
	if err != nil {
		tx.rollback(ctx)
	}
	return err
}

// sqlTxWrite runs fn once in a database/sql transaction, for a *sql.DB
// without multi-statement support.
func (e *executor) sqlTxWrite(ctx context.Context, fn func(q querier) ([]stmt, error)) error {
	tx, err := e.beginPool(ctx)
	if err != nil {
		return err
	}
	if err = runEnd(ctx, tx, fn); err != nil {
		tx.Rollback() //nolint:errcheck // fn's error is the one to report
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", translateError(err))
	}
	return nil
}

// writeInDriverTx runs fn (a claim, or a write in a claim's transaction)
// in a transaction the driver began (see executor.driverTx) directly on
// it, elsewhere as write does. A savepoint would only undo fn's writes
// (the leases; a keyed claim's key cursor before them) when a statement
// after them fails, and the caller of such a transaction (the client)
// rolls it back after any error; skipping it saves two round trips, which
// matters in a claim that holds a limit lock. In a user's transaction the
// savepoint stays.
func (e *executor) writeInDriverTx(ctx context.Context, fn func(q querier) error) error {
	return e.writeEndInDriverTx(ctx, func(q querier) ([]stmt, error) { return nil, fn(q) })
}

// writeEndInDriverTx is writeInDriverTx for a fn whose one write statement
// is the last it returns, as for writeEnd.
func (e *executor) writeEndInDriverTx(ctx context.Context, fn func(q querier) ([]stmt, error)) error {
	if !e.driverTx {
		return e.writeEnd(ctx, fn)
	}
	if err := e.open(); err != nil {
		return err
	}
	return runEnd(ctx, e.q, fn)
}

// Exec runs sql, which may hold several statements separated by semicolons
// (with multiStatements=true in the DSN).
func (e *executor) Exec(ctx context.Context, sql string) error {
	q, err := e.read()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, sql); err != nil {
		return fmt.Errorf("exec: %w", translateError(err))
	}
	return nil
}

// Now returns the database clock.
func (e *executor) Now(ctx context.Context) (time.Time, error) {
	q, err := e.read()
	if err != nil {
		return time.Time{}, err
	}
	var now dbTime
	if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", translateError(err))
	}
	return now.Time, nil
}

// placeholders returns n comma-separated placeholders.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// idArgs converts IDs to statement arguments.
func idArgs(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
