package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// errWriteLockTimeout is returned when the driver's in-process write lock is
// not free within BusyTimeout, as SQLite reports SQLITE_BUSY when another
// process holds the file's write lock that long. It usually means a goroutine
// holding a transaction from Begin waits on a write from the pool.
var errWriteLockTimeout = errors.New("leasehold/sqlite: timed out waiting for the write lock")

// lockWrites takes the driver's write lock and returns its release.
func (d *Driver) lockWrites(ctx context.Context) (func(), error) {
	unlock := func() { <-d.writeLock }
	select {
	case d.writeLock <- struct{}{}:
		return unlock, nil
	default:
	}
	timer := time.NewTimer(BusyTimeout * time.Millisecond)
	defer timer.Stop()
	select {
	case d.writeLock <- struct{}{}:
		return unlock, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for write lock: %w", ctx.Err())
	case <-timer.C:
		return nil, errWriteLockTimeout
	}
}

// withSavepoint runs fn under a savepoint on q, which is inside a transaction,
// rolling back to it when fn fails. Savepoints with the same name nest: each
// RELEASE or ROLLBACK TO acts on the innermost.
func withSavepoint(ctx context.Context, q querier, name string, fn func(q querier) error) error {
	if _, err := q.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("begin savepoint: %w", err)
	}
	if err := fn(q); err != nil {
		rollbackTo(ctx, q, name) //nolint:errcheck // fn's error is the one to report
		return err
	}
	if _, err := q.ExecContext(ctx, "RELEASE "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// rollbackTo undoes the savepoint name and ends it, even when ctx is done.
func rollbackTo(ctx context.Context, q querier, name string) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := q.ExecContext(ctx, "ROLLBACK TO "+name); err != nil {
		return fmt.Errorf("roll back to savepoint: %w", err)
	}
	if _, err := q.ExecContext(ctx, "RELEASE "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// txExecutor is an executor in a transaction the driver started: a
// transaction on the pool, or a savepoint inside a transaction.
type txExecutor struct {
	executor
}

var _ driver.ExecutorTx = (*txExecutor)(nil)

// Begin starts a transaction. On the pool it takes the driver's write lock
// and begins a transaction on the database (BEGIN IMMEDIATE with the DSN's
// _txlock=immediate), holding the lock until Commit or Rollback; as with
// database/sql, the transaction rolls back if ctx ends first. Inside a
// transaction it opens a savepoint.
func (e *executor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	if !e.onPool {
		const name = "leasehold_tx"
		if _, err := e.q.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
			return nil, fmt.Errorf("begin savepoint: %w", err)
		}
		q := e.q
		st := sqlbackend.NewTx(e.tx, func(ctx context.Context, commit bool) error {
			if !commit {
				return rollbackTo(ctx, q, name)
			}
			if _, err := q.ExecContext(ctx, "RELEASE "+name); err != nil {
				return fmt.Errorf("release savepoint: %w", err)
			}
			return nil
		})
		return &txExecutor{executor{d: e.d, q: q, raw: e.raw, tx: st}}, nil
	}

	conn, release, err := e.lockConn(ctx)
	if err != nil {
		return nil, err
	}
	return e.d.beginOn(ctx, conn, release)
}

// txBeginner is where a transaction of the driver's own begins: the pool,
// or a connection.
type txBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// beginPool begins a transaction on the pool while the caller holds the
// driver's write lock, which release gives back when the transaction ends
// (or at once when it cannot begin).
func (d *Driver) beginPool(ctx context.Context, release func()) (driver.ExecutorTx, error) {
	return d.beginOn(ctx, d.db, release)
}

// beginOn begins a transaction on db, a connection the caller took before
// the driver's write lock (lockConn) or the pool, while the caller holds
// that lock; release gives back both when the transaction ends (or at once
// when it cannot begin).
func (d *Driver) beginOn(ctx context.Context, db txBeginner, release func()) (driver.ExecutorTx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		release()
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	st := sqlbackend.NewTx(nil, func(_ context.Context, commit bool) error {
		defer release()
		if commit {
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			return nil
		}
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			return fmt.Errorf("roll back: %w", err)
		}
		return nil
	})
	return &txExecutor{executor{d: d, q: d.txQuerier(tx), raw: tx, tx: st}}, nil
}

// Commit commits the transaction, or releases the savepoint.
func (t *txExecutor) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }

// Rollback rolls the transaction back; after Commit or Rollback it does
// nothing.
func (t *txExecutor) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
