package sqlite

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// Migration bookkeeping.
const (
	migrationCreateTableSQL = `CREATE TABLE IF NOT EXISTS leasehold_migration (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
)`
	migrationAppliedSQL = `SELECT version FROM leasehold_migration ORDER BY version`
	migrationInsertSQL  = `INSERT INTO leasehold_migration (version, name, applied_at)
VALUES (?1, ?2, ` + nowExpr + `)`
	migrationDeleteSQL = `DELETE FROM leasehold_migration WHERE version = ?1`
)

// MigrationApplied returns the applied migration versions in order, creating
// the leasehold_migration table when missing.
func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	versions := []int{}
	err := e.write(ctx, func(q querier) error {
		versions = versions[:0]
		if _, err := q.ExecContext(ctx, migrationCreateTableSQL); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, migrationAppliedSQL)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return err
			}
			versions = append(versions, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	return versions, nil
}

// MigrationRecord marks m applied (up) or removes its record (down).
func (e *executor) MigrationRecord(ctx context.Context, params *driver.MigrationRecordParams) error {
	m, up := params.Migration, params.Up
	err := e.write(ctx, func(q querier) error {
		if up {
			_, err := q.ExecContext(ctx, migrationInsertSQL, m.Version, m.Name)
			return err
		}
		_, err := q.ExecContext(ctx, migrationDeleteSQL, m.Version)
		return err
	})
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	return nil
}
