package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/driver"
)

// dbtx is what the executor needs from its connection: both *pgxpool.Pool and
// pgx.Tx provide it. Begin on a pgx.Tx opens a savepoint.
type dbtx interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// executor runs the queue's statements on a pool or inside a transaction.
type executor struct {
	db dbtx
}

var _ driver.Executor = (*executor)(nil)

// executorTx is an executor inside a transaction (or savepoint) it started.
type executorTx struct {
	executor
	tx pgx.Tx
}

var _ driver.ExecutorTx = (*executorTx)(nil)

func (e *executor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", translate(err))
	}
	return &executorTx{executor: executor{db: tx}, tx: tx}, nil
}

func (t *executorTx) Commit(ctx context.Context) error {
	if err := t.tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", translate(err))
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

func (e *executor) Exec(ctx context.Context, sql string) error {
	// Without arguments pgx uses the simple protocol, which accepts several
	// statements separated by semicolons.
	if _, err := e.db.Exec(ctx, sql); err != nil {
		return fmt.Errorf("exec: %w", translate(err))
	}
	return nil
}

func (e *executor) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := e.db.QueryRow(ctx, sqlNow).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", translate(err))
	}
	return now.UTC(), nil
}

// inTx runs fn in a transaction of its own: a real one on the pool, a
// savepoint inside the caller's transaction. Methods that need more than one
// statement use it so that each stays atomic.
func (e *executor) inTx(ctx context.Context, fn func(tx *executor) error) error {
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", translate(err))
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := fn(&executor{db: tx}); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", translate(err))
	}
	return nil
}

// isUniqueViolation reports whether err is a unique index violation
// (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// translate maps pgx errors to the driver's sentinels at the backend
// boundary; other errors pass through unchanged.
func translate(err error) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return driver.ErrNotFound
	case errors.Is(err, pgx.ErrTxClosed):
		return driver.ErrClosed
	}
	return err
}
