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

// beginPool starts one of the driver's own transactions on the pool (or on
// the executor's reserved connection). READ COMMITTED keeps locking reads
// from taking gap locks, which would hold up inserts into a queue while a
// claim is in flight.
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
	if err := e.open(); err != nil {
		return err
	}
	if !e.onPool {
		return e.d.withSavepoint(ctx, e.q, fn)
	}
	for attempt := 1; ; attempt++ {
		tx, err := e.beginPool(ctx)
		if err != nil {
			return err
		}
		err = fn(tx)
		if err == nil {
			if err = tx.Commit(); err == nil {
				return nil
			}
			err = fmt.Errorf("commit: %w", translateError(err))
		} else {
			tx.Rollback() //nolint:errcheck // fn's error is the one to report
		}
		if !isDeadlock(err) || attempt == maxTxAttempts || ctx.Err() != nil {
			return err
		}
	}
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
	if !e.driverTx {
		return e.write(ctx, fn)
	}
	if err := e.open(); err != nil {
		return err
	}
	return fn(e.q)
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
