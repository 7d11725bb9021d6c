package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	sqlitedrv "modernc.org/sqlite"

	"github.com/leasehold/leasehold/driver"
)

// Migration bookkeeping. compatible_with is the migration's declaration
// (Migration.CompatibleWith), NULL when it made none.
const (
	migrationCreateTableSQL = `CREATE TABLE IF NOT EXISTS leasehold_migration (
	version         INTEGER PRIMARY KEY,
	name            TEXT    NOT NULL,
	applied_at      INTEGER NOT NULL,
	compatible_with INTEGER
)`
	// migrationAddCompatibleSQL brings a table created before
	// compatible_with existed up to date.
	migrationAddCompatibleSQL = `ALTER TABLE leasehold_migration ADD COLUMN compatible_with INTEGER`
	// migrationProbeSQL reports whether the bookkeeping table, the job
	// table and the compatible_with column exist.
	migrationProbeSQL = `SELECT
	EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'leasehold_migration'),
	EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'leasehold_job'),
	EXISTS (SELECT 1 FROM pragma_table_info('leasehold_migration') WHERE name = 'compatible_with')`
	migrationAppliedSQL  = `SELECT version FROM leasehold_migration ORDER BY version`
	migrationStateSQL    = `SELECT version, name, coalesce(compatible_with, 0) FROM leasehold_migration ORDER BY version`
	migrationStateOldSQL = `SELECT version, name, 0 FROM leasehold_migration ORDER BY version`
	migrationInsertSQL   = `INSERT INTO leasehold_migration (version, name, applied_at, compatible_with)
VALUES (?1, ?2, ` + nowExpr + `, nullif(?3, 0))`
	migrationDeleteSQL = `DELETE FROM leasehold_migration WHERE version = ?1`
)

// migrationProbe reads what migrationProbeSQL reports.
func migrationProbe(ctx context.Context, q querier) (recorded, jobTable, hasCompatible bool, err error) {
	if err := q.QueryRowContext(ctx, migrationProbeSQL).Scan(&recorded, &jobTable, &hasCompatible); err != nil {
		return false, false, false, fmt.Errorf("probe migration table: %w", err)
	}
	return recorded, jobTable, hasCompatible, nil
}

// MigrationApplied returns the applied migration versions in order, creating
// the leasehold_migration table when missing.
func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	versions := []int{}
	err := e.write(ctx, func(q querier) error {
		versions = versions[:0]
		recorded, _, hasCompatible, err := migrationProbe(ctx, q)
		if err != nil {
			return err
		}
		switch {
		case !recorded:
			if _, err := q.ExecContext(ctx, migrationCreateTableSQL); err != nil {
				return err
			}
		case !hasCompatible:
			if _, err := q.ExecContext(ctx, migrationAddCompatibleSQL); err != nil {
				return err
			}
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
			_, err := q.ExecContext(ctx, migrationInsertSQL, m.Version, m.Name, m.CompatibleWith())
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

var (
	_ driver.MigrationLocker      = (*Driver)(nil)
	_ driver.MigrationStateReader = (*Driver)(nil)
)

// MigrationState reads the migration bookkeeping without creating anything.
func (d *Driver) MigrationState(ctx context.Context) (*driver.MigrationState, error) {
	recorded, jobTable, hasCompatible, err := migrationProbe(ctx, d.db)
	if err != nil {
		return nil, err
	}
	st := &driver.MigrationState{Recorded: recorded, JobTable: jobTable, Applied: []driver.AppliedMigration{}}
	if !recorded {
		return st, nil
	}
	query := migrationStateSQL
	if !hasCompatible {
		query = migrationStateOldSQL
	}
	rows, err := d.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var m driver.AppliedMigration
		if err := rows.Scan(&m.Version, &m.Name, &m.CompatibleWith); err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		st.Applied = append(st.Applied, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	return st, nil
}

// migrationLockRetry is the pause between attempts at the write lock while
// another process migrates.
const migrationLockRetry = 50 * time.Millisecond

// MigrationLock takes the file's write lock (BEGIN IMMEDIATE) in a
// transaction that the whole run uses: another process's migrate waits in
// SQLite's busy handler, retried until Timeout (so the wait can exceed it by
// up to BusyTimeout).
func (d *Driver) MigrationLock(ctx context.Context, params *driver.MigrationLockParams) (driver.MigrationSession, error) {
	timeout := params.Timeout
	if timeout <= 0 {
		timeout = driver.DefaultMigrationLockTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		tx, err := d.beginMigration(ctx, deadline)
		if err == nil {
			return &migrationSession{tx: tx}, nil
		}
		if !isBusy(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("take migration lock: %w", err)
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w after %s: another migrate is running on this file", driver.ErrMigrationLockTimeout, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(migrationLockRetry):
		}
	}
}

// beginMigration takes the driver's write lock, waiting no later than
// deadline, and begins the transaction (BEGIN IMMEDIATE), which waits up to
// BusyTimeout for another process's write lock.
func (d *Driver) beginMigration(ctx context.Context, deadline time.Time) (driver.ExecutorTx, error) {
	lockCtx, cancel := context.WithDeadline(ctx, deadline)
	release, err := d.lockWrites(lockCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			return nil, errWriteLockTimeout // the deadline passed, not ctx
		}
		return nil, err
	}
	return d.beginPool(ctx, release)
}

// isBusy reports whether err says the write lock is held elsewhere: SQLITE_BUSY
// or SQLITE_LOCKED (with any extended code), or this driver's own write lock
// timing out.
func isBusy(err error) bool {
	if errors.Is(err, errWriteLockTimeout) {
		return true
	}
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case 5, 6: // SQLITE_BUSY, SQLITE_LOCKED
		return true
	}
	return false
}

// migrationSession is a transaction holding the write lock.
type migrationSession struct {
	tx driver.ExecutorTx
}

func (s *migrationSession) Executor() driver.Executor { return s.tx }

func (s *migrationSession) Release(ctx context.Context) error {
	if err := s.tx.Commit(ctx); err != nil {
		s.tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the commit's error is the one to report
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}
