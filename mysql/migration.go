package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// Migration bookkeeping.
const (
	migrationCreateTableSQL = `CREATE TABLE IF NOT EXISTS leasehold_migration (
	version    INT          NOT NULL PRIMARY KEY,
	name       VARCHAR(255) NOT NULL,
	applied_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`
	migrationAppliedSQL = `SELECT version FROM leasehold_migration ORDER BY version`
	migrationInsertSQL  = `INSERT INTO leasehold_migration (version, name, applied_at)
VALUES (?, ?, ` + nowExpr + `)`
	migrationDeleteSQL = `DELETE FROM leasehold_migration WHERE version = ?`
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
	if _, err := q.ExecContext(ctx, migrationCreateTableSQL); err != nil {
		return nil, fmt.Errorf("create migration table: %w", translateError(err))
	}
	rows, err := q.QueryContext(ctx, migrationAppliedSQL)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
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
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
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
		_, err = q.ExecContext(ctx, migrationInsertSQL, m.Version, m.Name)
	} else {
		_, err = q.ExecContext(ctx, migrationDeleteSQL, m.Version)
	}
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, translateError(err))
	}
	return nil
}
