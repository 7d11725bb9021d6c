package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leasehold/leasehold/driver"
)

// migrationTableSQL creates the migration bookkeeping table.
// compatible_with is the migration's declaration (Migration.CompatibleWith),
// NULL when it made none.
const migrationTableSQL = `
CREATE TABLE IF NOT EXISTS leasehold_migration (
	version         integer PRIMARY KEY,
	name            text NOT NULL,
	applied_at      timestamptz NOT NULL DEFAULT now(),
	compatible_with integer
)`

// migrationAddCompatibleSQL brings a bookkeeping table created before
// compatible_with existed up to date.
const migrationAddCompatibleSQL = `ALTER TABLE leasehold_migration ADD COLUMN IF NOT EXISTS compatible_with integer`

// migrationProbeSQL reports whether the bookkeeping table, the job table and
// the compatible_with column exist, without creating anything.
const migrationProbeSQL = `
SELECT to_regclass('leasehold_migration') IS NOT NULL,
       to_regclass('leasehold_job') IS NOT NULL,
       EXISTS (SELECT 1 FROM pg_attribute
               WHERE attrelid = to_regclass('leasehold_migration')
                 AND attname = 'compatible_with' AND NOT attisdropped)`

// migrationAppliedSQL lists the applied versions.
const migrationAppliedSQL = `SELECT version FROM leasehold_migration ORDER BY version`

// migrationStateSQL and migrationStateOldSQL list the applied migrations
// with their declarations, on a table with and without compatible_with.
const (
	migrationStateSQL    = `SELECT version, name, coalesce(compatible_with, 0) FROM leasehold_migration ORDER BY version`
	migrationStateOldSQL = `SELECT version, name, 0 FROM leasehold_migration ORDER BY version`
)

// migrationInsertSQL and migrationDeleteSQL record a migration applied or
// reverted.
const (
	migrationInsertSQL = `INSERT INTO leasehold_migration (version, name, compatible_with) VALUES ($1, $2, nullif($3, 0))`
	migrationDeleteSQL = `DELETE FROM leasehold_migration WHERE version = $1`
)

// The migration lock is a transaction-scoped advisory lock, so that it works
// through a transaction-mode pooler such as PgBouncer (a session lock there
// would belong to whichever server connection ran the statement). Its key is
// derived from the schema (see migrationLockKey): Options.Schema, else the
// search_path's current_schema(). lock_timeout bounds the wait
// and is restored once the lock is held, so that it does not apply to the
// migrations' own statements.
const (
	migrationSchemaSQL      = `SELECT coalesce(current_schema(), ''), current_setting('lock_timeout')`
	migrationLockSQL        = `SELECT pg_advisory_xact_lock($1)`
	migrationLockTimeoutSQL = `SELECT set_config('lock_timeout', $1, true)`
)

// migrationLockHolderSQL finds the session holding the advisory lock whose
// bigint key is split into $1 (high 32 bits) and $2 (low 32 bits), as
// pg_locks shows it, in the current database.
const migrationLockHolderSQL = `
SELECT a.pid, coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'local socket'),
       coalesce(a.xact_start, a.backend_start)
FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid::bigint = $1 AND l.objid::bigint = $2`

// migrationLockKey is the advisory lock key of schema's migrations: the first
// 8 bytes of FNV-1a 64 of "leasehold migrate " and the schema name, so that
// schemas migrate independently and the key does not depend on the server's
// hash functions.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("leasehold migrate " + schema))
	return int64(h.Sum64())
}

// probe reads what migrationProbeSQL reports.
func (e *executor) migrationProbe(ctx context.Context) (recorded, jobTable, hasCompatible bool, err error) {
	if err := e.db.QueryRow(ctx, migrationProbeSQL).Scan(&recorded, &jobTable, &hasCompatible); err != nil {
		return false, false, false, fmt.Errorf("probe migration table: %w", translateError(err))
	}
	return recorded, jobTable, hasCompatible, nil
}

func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	recorded, _, hasCompatible, err := e.migrationProbe(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case !recorded:
		if _, err := e.db.Exec(ctx, migrationTableSQL); err != nil {
			return nil, fmt.Errorf("create migration table: %w", translateError(err))
		}
	case !hasCompatible:
		if _, err := e.db.Exec(ctx, migrationAddCompatibleSQL); err != nil {
			return nil, fmt.Errorf("update migration table: %w", translateError(err))
		}
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
		_, err = e.db.Exec(ctx, migrationInsertSQL, m.Version, m.Name, m.CompatibleWith())
	} else {
		_, err = e.db.Exec(ctx, migrationDeleteSQL, m.Version)
	}
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, translateError(err))
	}
	return nil
}

var (
	_ driver.MigrationLocker        = (*Driver)(nil)
	_ driver.MigrationStateReader   = (*Driver)(nil)
	_ driver.MigrationLockInspector = (*Driver)(nil)
)

// MigrationLockHolder describes the backend holding the schema's migration
// lock, from pg_locks and pg_stat_activity, or returns "" when it is free.
func (d *Driver) MigrationLockHolder(ctx context.Context) (string, error) {
	e := d.GetExecutor().(*executor)
	schema := ""
	if d.q != nil {
		schema = d.q.schema
	} else if err := e.db.QueryRow(ctx, `SELECT coalesce(current_schema(), '')`).Scan(&schema); err != nil {
		return "", fmt.Errorf("read schema: %w", translateError(err))
	}
	key := uint64(migrationLockKey(schema))
	var (
		pid         int32
		app, client string
		since       time.Time
	)
	err := e.db.QueryRow(ctx, migrationLockHolderSQL, int64(key>>32), int64(key&0xffffffff)).Scan(&pid, &app, &client, &since)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read migration lock holder: %w", translateError(err))
	}
	if app == "" {
		app = "no application_name"
	}
	return fmt.Sprintf("Postgres backend pid %d (%s, from %s) since %s", pid, app, client, since.UTC().Format(time.RFC3339)), nil
}

// MigrationState reads the migration bookkeeping of the driver's schema
// without creating anything.
func (d *Driver) MigrationState(ctx context.Context) (*driver.MigrationState, error) {
	e := d.GetExecutor().(*executor)
	recorded, jobTable, hasCompatible, err := e.migrationProbe(ctx)
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
	rows, err := e.db.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
	}
	st.Applied, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (driver.AppliedMigration, error) {
		var m driver.AppliedMigration
		err := row.Scan(&m.Version, &m.Name, &m.CompatibleWith)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
	}
	return st, nil
}

// MigrationLock begins a transaction and takes the schema's migration lock in
// it (pg_advisory_xact_lock): the whole run is that one transaction, and the
// lock ends with it. It works through PgBouncer in transaction mode.
func (d *Driver) MigrationLock(ctx context.Context, params *driver.MigrationLockParams) (driver.MigrationSession, error) {
	timeout := params.Timeout
	if timeout <= 0 {
		timeout = driver.DefaultMigrationLockTimeout
	}
	ex, err := d.GetExecutor().Begin(ctx)
	if err != nil {
		return nil, err
	}
	tx := ex.(*executorTx)
	schema := "" // the search_path's, read in the transaction
	if d.q != nil {
		schema = d.q.schema
	}
	if err := takeMigrationLock(ctx, tx.tx, schema, timeout); err != nil {
		tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the lock's error is the one to report
		return nil, err
	}
	return &migrationSession{tx: tx}, nil
}

// takeMigrationLock takes schema's migration lock in tx; an empty schema
// means current_schema().
func takeMigrationLock(ctx context.Context, tx pgx.Tx, schema string, timeout time.Duration) error {
	var current, oldTimeout string
	if err := tx.QueryRow(ctx, migrationSchemaSQL).Scan(&current, &oldTimeout); err != nil {
		return fmt.Errorf("read schema: %w", translateError(err))
	}
	if schema == "" {
		schema = current
	}
	ms := max(timeout.Milliseconds(), 1)
	if _, err := tx.Exec(ctx, migrationLockTimeoutSQL, fmt.Sprintf("%dms", ms)); err != nil {
		return fmt.Errorf("set lock_timeout: %w", translateError(err))
	}
	if _, err := tx.Exec(ctx, migrationLockSQL, migrationLockKey(schema)); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
			return fmt.Errorf("%w of schema %q after %s: another migrate is running", driver.ErrMigrationLockTimeout, schema, timeout)
		}
		return fmt.Errorf("take migration lock: %w", translateError(err))
	}
	if _, err := tx.Exec(ctx, migrationLockTimeoutSQL, oldTimeout); err != nil {
		return fmt.Errorf("restore lock_timeout: %w", translateError(err))
	}
	return nil
}

// migrationSession is a transaction holding the migration lock.
type migrationSession struct {
	tx *executorTx
}

func (s *migrationSession) Executor() driver.Executor { return s.tx }

func (s *migrationSession) Release(ctx context.Context) error {
	if err := s.tx.Commit(ctx); err != nil {
		s.tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // the commit's error is the one to report
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}
