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
	// drv is the driver whose pool db is; set on the pool's executor
	// (Driver.GetExecutor) only, nil inside a transaction.
	drv *Driver
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

// wrap returns db with its statements rewritten for the schema (qualified);
// db itself when q is nil.
func (q *qualifier) wrap(db dbtx) dbtx {
	if q == nil {
		return db
	}
	return qualified{db: db, q: q}
}

// wrapTx is wrap for a transaction: the result is still a pgx.Tx.
func (q *qualifier) wrapTx(tx pgx.Tx) pgx.Tx {
	if q == nil {
		return tx
	}
	if _, ok := tx.(qualifiedTx); ok {
		return tx
	}
	return qualifiedTx{Tx: tx, q: q}
}

// qualified is a pool or pooled connection whose statements name the
// driver's schema (see qualifier).
type qualified struct {
	db dbtx
	q  *qualifier
}

func (d qualified) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := d.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return qualifiedTx{Tx: tx, q: d.q}, nil
}

func (d qualified) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return d.db.Exec(ctx, d.q.sql(sql), args...)
}

func (d qualified) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return d.db.Query(ctx, d.q.sql(sql), args...)
}

func (d qualified) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return d.db.QueryRow(ctx, d.q.sql(sql), args...)
}

func (d qualified) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return d.db.CopyFrom(ctx, d.q.table(table), columns, src)
}

func (d qualified) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	d.q.batch(b)
	return d.db.SendBatch(ctx, b)
}

// qualifiedTx is a transaction whose statements name the driver's schema.
// It is a pgx.Tx, so that the methods that need a transaction recognise it.
type qualifiedTx struct {
	pgx.Tx
	q *qualifier
}

func (t qualifiedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.Tx.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return qualifiedTx{Tx: tx, q: t.q}, nil
}

func (t qualifiedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.Tx.Exec(ctx, t.q.sql(sql), args...)
}

func (t qualifiedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.Tx.Query(ctx, t.q.sql(sql), args...)
}

func (t qualifiedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.Tx.QueryRow(ctx, t.q.sql(sql), args...)
}

func (t qualifiedTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	return t.Tx.CopyFrom(ctx, t.q.table(table), columns, src)
}

func (t qualifiedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	t.q.batch(b)
	return t.Tx.SendBatch(ctx, b)
}

func (t qualifiedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.Tx.Prepare(ctx, name, t.q.sql(sql))
}
