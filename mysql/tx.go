package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// savepointName returns a savepoint name not used before by d: MySQL
// replaces a savepoint of the same name rather than nesting a new one.
func (d *Driver) savepointName() string {
	return "leasehold_sp_" + strconv.FormatUint(d.savepoints.Add(1), 10)
}

// withSavepoint runs fn under a new savepoint on q, which is inside a
// transaction, rolling back to it when fn fails.
func (d *Driver) withSavepoint(ctx context.Context, q querier, fn func(q querier) error) error {
	name := d.savepointName()
	if _, err := q.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
		return fmt.Errorf("begin savepoint: %w", translateError(err))
	}
	if err := fn(q); err != nil {
		rollbackTo(ctx, q, name) //nolint:errcheck // fn's error is the one to report
		return err
	}
	if _, err := q.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", translateError(err))
	}
	return nil
}

// rollbackTo undoes the savepoint name and ends it, even when ctx is done.
func rollbackTo(ctx context.Context, q querier, name string) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := q.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+name); err != nil {
		return fmt.Errorf("roll back to savepoint: %w", translateError(err))
	}
	if _, err := q.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
		return fmt.Errorf("release savepoint: %w", translateError(err))
	}
	return nil
}

// txExecutor is an executor in a transaction the driver started: a
// transaction on the pool, or a savepoint inside a transaction.
type txExecutor struct {
	executor
}

var _ driver.ExecutorTx = (*txExecutor)(nil)

// Begin starts a transaction: on the pool a READ COMMITTED transaction (it
// rolls back if ctx ends first, as with database/sql), inside a transaction a
// savepoint.
func (e *executor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	if !e.onPool {
		name := e.d.savepointName()
		if _, err := e.q.ExecContext(ctx, "SAVEPOINT "+name); err != nil {
			return nil, fmt.Errorf("begin savepoint: %w", translateError(err))
		}
		q := e.q
		st := sqlbackend.NewTx(e.tx, func(ctx context.Context, commit bool) error {
			if !commit {
				return rollbackTo(ctx, q, name)
			}
			if _, err := q.ExecContext(ctx, "RELEASE SAVEPOINT "+name); err != nil {
				return fmt.Errorf("release savepoint: %w", translateError(err))
			}
			return nil
		})
		return &txExecutor{executor{d: e.d, q: q, tx: st, driverTx: e.driverTx}}, nil
	}
	tx, err := e.beginPool(ctx)
	if err != nil {
		return nil, err
	}
	st := sqlbackend.NewTx(nil, func(_ context.Context, commit bool) error {
		if commit {
			if err := tx.Commit(); err != nil {
				return fmt.Errorf("commit: %w", translateError(err))
			}
			return nil
		}
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			return fmt.Errorf("roll back: %w", err)
		}
		return nil
	})
	return &txExecutor{executor{d: e.d, q: tx, tx: st, driverTx: true}}, nil
}

// Commit commits the transaction, or releases the savepoint.
func (t *txExecutor) Commit(ctx context.Context) error { return t.tx.Commit(ctx) }

// Rollback rolls the transaction back; after Commit or Rollback it does
// nothing.
func (t *txExecutor) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
