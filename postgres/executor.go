package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/driver"
)

// nowSQL reads the database clock (the transaction's start inside one).
const nowSQL = `SELECT now()`

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

func (e *executor) Exec(ctx context.Context, sql string) error {
	// Without arguments pgx uses the simple protocol, which accepts several
	// statements separated by semicolons.
	if _, err := e.db.Exec(ctx, sql); err != nil {
		return fmt.Errorf("exec: %w", translateError(err))
	}
	return nil
}

func (e *executor) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := e.db.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", translateError(err))
	}
	return now.UTC(), nil
}
