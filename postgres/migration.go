package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	if _, err := e.db.Exec(ctx, sqlMigrationTable); err != nil {
		return nil, fmt.Errorf("create migration table: %w", translate(err))
	}
	rows, err := e.db.Query(ctx, sqlMigrationApplied)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translate(err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translate(err))
	}
	return versions, nil
}

func (e *executor) MigrationRecord(ctx context.Context, params *driver.MigrationRecordParams) error {
	m, up := params.Migration, params.Up
	var err error
	if up {
		_, err = e.db.Exec(ctx, sqlMigrationInsert, m.Version, m.Name)
	} else {
		_, err = e.db.Exec(ctx, sqlMigrationDelete, m.Version)
	}
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, translate(err))
	}
	return nil
}
