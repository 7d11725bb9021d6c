package sqlite

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// MigrationApplied returns the applied migration versions in order, creating
// the leasehold_migration table when missing.
func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	versions := []int{}
	err := e.write(ctx, func(q querier) error {
		versions = versions[:0]
		if _, err := q.ExecContext(ctx, queryMigrationCreateTable); err != nil {
			return err
		}
		rows, err := q.QueryContext(ctx, queryMigrationApplied)
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
			_, err := q.ExecContext(ctx, queryMigrationInsert, m.Version, m.Name)
			return err
		}
		_, err := q.ExecContext(ctx, queryMigrationDelete, m.Version)
		return err
	})
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	return nil
}
