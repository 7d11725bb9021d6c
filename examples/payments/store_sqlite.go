package payments

import (
	"context"
	"database/sql"
	"errors"
)

// NewSQLiteStore returns a store on a SQLite database opened for the
// leasehold sqlite backend (sqlite.Open or sqlite.DSN): its transactions take
// the write lock at once, which payment writes rely on.
func NewSQLiteStore(db *sql.DB) *Store[*sql.Tx] {
	return &Store[*sql.Tx]{b: sqliteBackend{db: db}}
}

type sqliteBackend struct{ db *sql.DB }

func (b sqliteBackend) begin(ctx context.Context) (*sql.Tx, error) { return b.db.BeginTx(ctx, nil) }
func (b sqliteBackend) commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }
func (b sqliteBackend) rollback(_ context.Context, tx *sql.Tx) error {
	if tx == nil {
		return errNoTx
	}
	err := tx.Rollback()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
func (b sqliteBackend) pool() querier         { return sqlQuerier{q: b.db} }
func (b sqliteBackend) tx(tx *sql.Tx) querier { return sqlQuerier{q: tx} }

// sqlConn is what *sql.DB and *sql.Tx share.
type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

type sqlQuerier struct{ q sqlConn }

func (s sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s sqlQuerier) query(ctx context.Context, query string, each func(scan func(...any) error) error, args ...any) error {
	rows, err := s.q.QueryContext(ctx, query, args...)
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
