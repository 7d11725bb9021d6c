package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
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

// endImmediate commits or rolls back the transaction open on conn and returns
// conn to the pool, discarding it when the transaction could not be ended.
func endImmediate(ctx context.Context, conn *sql.Conn, commit bool) error {
	var err error
	if commit {
		if _, err = conn.ExecContext(ctx, "COMMIT"); err != nil {
			err = fmt.Errorf("commit: %w", err)
		}
	}
	if !commit || err != nil {
		// Roll back even when ctx is done: the connection must not go back
		// to the pool inside a transaction. If that fails too, discard it.
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			if !commit {
				err = fmt.Errorf("roll back: %w", rerr)
			}
			conn.Raw(func(any) error { return sqldriver.ErrBadConn }) //nolint:errcheck // it discards the connection
		}
	}
	conn.Close()
	return err
}

// withSavepoint runs fn under a savepoint on q, which is inside a transaction,
// rolling back to it when fn fails. Savepoints with the same name nest: each
// RELEASE or ROLLBACK TO acts on the innermost.
func withSavepoint(ctx context.Context, q querier, name string, fn func(q querier) error) error {
	if _, err := q.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("begin savepoint: %w", err)
	}
	if err := fn(q); err != nil {
		q.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO "+name+"; RELEASE "+name) //nolint:errcheck // fn's error is the one to report
		return err
	}
	if _, err := q.ExecContext(ctx, "RELEASE "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", err)
	}
	return nil
}

// txState tracks a transaction the driver started.
type txState struct {
	parent *txState
	mu     sync.Mutex
	done   bool
	end    func(ctx context.Context, commit bool) error
}

func (t *txState) isDone() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.done
}

// txExecutor is an executor in a transaction the driver started: BEGIN
// IMMEDIATE on a pooled connection, or a savepoint inside a transaction.
type txExecutor struct {
	executor
}

var _ driver.ExecutorTx = (*txExecutor)(nil)

// Begin starts a transaction. On the pool it takes the driver's write lock
// and a connection and runs BEGIN IMMEDIATE, holding both until Commit or
// Rollback; inside a transaction it opens a savepoint.
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
		st := &txState{parent: e.tx, end: func(ctx context.Context, commit bool) error {
			if commit {
				if _, err := q.ExecContext(ctx, "RELEASE "+name); err != nil {
					return fmt.Errorf("release savepoint: %w", err)
				}
				return nil
			}
			if _, err := q.ExecContext(context.WithoutCancel(ctx), "ROLLBACK TO "+name+"; RELEASE "+name); err != nil {
				return fmt.Errorf("roll back to savepoint: %w", err)
			}
			return nil
		}}
		return &txExecutor{executor{d: e.d, q: q, tx: st}}, nil
	}

	release, err := e.d.lockWrites(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := e.d.db.Conn(ctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("get connection: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		release()
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	st := &txState{end: func(ctx context.Context, commit bool) error {
		defer release()
		return endImmediate(ctx, conn, commit)
	}}
	return &txExecutor{executor{d: e.d, q: conn, tx: st}}, nil
}

// Commit commits the transaction, or releases the savepoint.
func (t *txExecutor) Commit(ctx context.Context) error {
	if t.tx.parent != nil {
		if err := (&executor{tx: t.tx.parent}).open(); err != nil {
			return err
		}
	}
	t.tx.mu.Lock()
	defer t.tx.mu.Unlock()
	if t.tx.done {
		return driver.ErrClosed
	}
	t.tx.done = true
	return t.tx.end(ctx, true)
}

// Rollback rolls the transaction back; after Commit or Rollback it does
// nothing.
func (t *txExecutor) Rollback(ctx context.Context) error {
	t.tx.mu.Lock()
	defer t.tx.mu.Unlock()
	if t.tx.done {
		return nil
	}
	t.tx.done = true
	if t.tx.parent != nil && t.tx.parent.isDone() {
		return nil // the parent's end already undid it
	}
	return t.tx.end(ctx, false)
}
