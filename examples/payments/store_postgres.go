package payments

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// NewPostgresStore returns a store on a Postgres pool, the pool of the
// leasehold postgres backend.
func NewPostgresStore(pool *pgxpool.Pool) *Store[pgx.Tx] {
	return &Store[pgx.Tx]{b: pgBackend{p: pool}}
}

type pgBackend struct{ p *pgxpool.Pool }

func (b pgBackend) begin(ctx context.Context) (pgx.Tx, error)   { return b.p.Begin(ctx) }
func (b pgBackend) commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }
func (b pgBackend) rollback(ctx context.Context, tx pgx.Tx) error {
	if tx == nil {
		return errNoTx
	}
	// A rollback after the caller's context ended must still end the
	// transaction, or the connection stays checked out.
	err := tx.Rollback(context.WithoutCancel(ctx))
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return err
}
func (b pgBackend) pool() querier        { return pgQuerier{q: b.p} }
func (b pgBackend) tx(tx pgx.Tx) querier { return pgQuerier{q: tx} }

// pgConn is what *pgxpool.Pool and pgx.Tx share.
type pgConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

type pgQuerier struct{ q pgConn }

func (p pgQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, dollarPlaceholders(query), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (p pgQuerier) query(ctx context.Context, query string, each func(scan func(...any) error) error, args ...any) error {
	rows, err := p.q.Query(ctx, dollarPlaceholders(query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
