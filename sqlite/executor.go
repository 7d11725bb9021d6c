package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// The statements of this package number their parameters (?1, ?2, ...) so
// that one value can appear twice. Each sits at the top of the file of the
// method that runs it.

// nowExpr is the database clock in microseconds since the Unix epoch. SQLite
// keeps 'now' to the millisecond and holds it still within one statement.
const nowExpr = "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)"

// nowSQL reads the database clock.
const nowSQL = "SELECT " + nowExpr

// executor implements driver.Executor on a querier.
type executor struct {
	d *Driver
	// q runs the driver's statements, prepared once through d's cache.
	q querier
	// raw runs Exec's arbitrary SQL: the pool or the transaction.
	raw querier
	// onPool is set when q is the pool: each write then takes the driver's
	// write lock and its own BEGIN IMMEDIATE transaction. Otherwise q is in a
	// transaction and writes run in it, under a savepoint.
	onPool bool
	// tx is the state of the transaction the driver started for q, nil on
	// the pool and in a user's transaction.
	tx *sqlbackend.Tx
	// conn, on an executor of reserved connections (OpenReserved), is the
	// connection q and raw run on: the pool's own transactions begin on it.
	// Nil on the driver's pool.
	conn *sql.Conn
}

// lockConn takes a connection (the executor's reserved one, or one of the
// pool's) and then the driver's write lock, in that order: the lock's holder
// must never wait for a connection of the pool, which handlers may all hold,
// while every other writer, the reserved connections' too, waits for it.
// done releases both.
func (e *executor) lockConn(ctx context.Context) (conn *sql.Conn, done func(), err error) {
	conn = e.conn
	if conn == nil {
		if conn, err = e.d.db.Conn(ctx); err != nil {
			return nil, nil, fmt.Errorf("take a connection: %w", err)
		}
	}
	closeOwn := func() {
		if conn != e.conn {
			conn.Close() //nolint:errcheck // back to the pool either way
		}
	}
	release, err := e.d.lockWrites(ctx)
	if err != nil {
		closeOwn()
		return nil, nil, err
	}
	return conn, func() { release(); closeOwn() }, nil
}

var _ driver.Executor = (*executor)(nil)

// open returns driver.ErrClosed once the executor's transaction, or one it is
// nested in, has ended.
func (e *executor) open() error { return e.tx.Open() }

// read returns the querier for a read, or driver.ErrClosed.
func (e *executor) read() (querier, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	return e.q, nil
}

// write runs fn atomically: on the pool in its own transaction under the
// driver's write lock (BEGIN IMMEDIATE with the DSN's _txlock=immediate), in
// a transaction under a savepoint. fn must not keep q.
func (e *executor) write(ctx context.Context, fn func(q querier) error) error {
	if err := e.open(); err != nil {
		return err
	}
	if !e.onPool {
		return withSavepoint(ctx, e.q, "leasehold_write", fn)
	}
	conn, release, err := e.lockConn(ctx)
	if err != nil {
		return err
	}
	defer release()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(e.d.txQuerier(tx)); err != nil {
		tx.Rollback() //nolint:errcheck // fn's error is the one to report
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Exec runs sql, which may hold several statements separated by semicolons.
// On the pool it runs under the driver's write lock but in no transaction of
// its own, so it may hold statements that cannot run in one (VACUUM).
func (e *executor) Exec(ctx context.Context, sql string) error {
	if err := e.open(); err != nil {
		return err
	}
	raw := e.raw
	if e.onPool {
		conn, release, err := e.lockConn(ctx)
		if err != nil {
			return err
		}
		defer release()
		raw = conn
	}
	if _, err := raw.ExecContext(ctx, sql); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	return nil
}

// Now returns the database clock.
func (e *executor) Now(ctx context.Context) (time.Time, error) {
	q, err := e.read()
	if err != nil {
		return time.Time{}, err
	}
	var us int64
	if err := q.QueryRowContext(ctx, nowSQL).Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return fromMicros(us), nil
}
