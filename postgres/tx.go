package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// executorTx is an executor inside a transaction (or savepoint) it started.
type executorTx struct {
	executor
	tx pgx.Tx
}

var _ driver.ExecutorTx = (*executorTx)(nil)

func (e *executor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", translateError(err))
	}
	return &executorTx{executor: executor{db: tx}, tx: tx}, nil
}

func (t *executorTx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", translateError(err))
	}
	return nil
}

func (t *executorTx) Rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

// inTx runs fn in a transaction of its own: a real one on the pool, a
// savepoint inside the caller's transaction. Methods that need more than one
// statement use it so that each stays atomic.
func (e *executor) inTx(ctx context.Context, fn func(tx *executor) error) error {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", translateError(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := fn(&executor{db: tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", translateError(err))
	}
	return nil
}
