package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// MigrationApplied returns the applied migration versions in order, creating
// the leasehold_migration table when missing. CREATE TABLE commits any open
// transaction implicitly (MySQL DDL is not transactional), so call it on the
// pool, as package migrate does.
func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	if _, err := q.ExecContext(ctx, queryMigrationCreateTable); err != nil {
		return nil, fmt.Errorf("create migration table: %w", translate(err))
	}
	rows, err := q.QueryContext(ctx, queryMigrationApplied)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translate(err))
	}
	defer rows.Close()
	versions := []int{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		versions = append(versions, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translate(err))
	}
	return versions, nil
}

// MigrationRecord marks m applied (up) or removes its record (down). After a
// migration's DDL has committed the transaction it ran in, the record is
// written in autocommit mode: a crash in between leaves the schema changed
// and unrecorded, and the migration must be finished by hand.
func (e *executor) MigrationRecord(ctx context.Context, params *driver.MigrationRecordParams) error {
	m, up := params.Migration, params.Up
	q, err := e.read()
	if err != nil {
		return err
	}
	if up {
		_, err = q.ExecContext(ctx, queryMigrationInsert, m.Version, m.Name)
	} else {
		_, err = q.ExecContext(ctx, queryMigrationDelete, m.Version)
	}
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, translate(err))
	}
	return nil
}
