package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// migrationTableSQL creates the migration bookkeeping table.
const migrationTableSQL = `
CREATE TABLE IF NOT EXISTS leasehold_migration (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// migrationAppliedSQL lists the applied versions.
const migrationAppliedSQL = `SELECT version FROM leasehold_migration ORDER BY version`

// migrationInsertSQL and migrationDeleteSQL record a migration applied or
// reverted.
const (
	migrationInsertSQL = `INSERT INTO leasehold_migration (version, name) VALUES ($1, $2)`
	migrationDeleteSQL = `DELETE FROM leasehold_migration WHERE version = $1`
)

func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	if _, err := e.db.Exec(ctx, migrationTableSQL); err != nil {
		return nil, fmt.Errorf("create migration table: %w", translateError(err))
	}
	rows, err := e.db.Query(ctx, migrationAppliedSQL)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
	}
	return versions, nil
}

func (e *executor) MigrationRecord(ctx context.Context, params *driver.MigrationRecordParams) error {
	m, up := params.Migration, params.Up
	var err error
	if up {
		_, err = e.db.Exec(ctx, migrationInsertSQL, m.Version, m.Name)
	} else {
		_, err = e.db.Exec(ctx, migrationDeleteSQL, m.Version)
	}
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, translateError(err))
	}
	return nil
}
