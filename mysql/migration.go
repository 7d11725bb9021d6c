package mysql

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// Migration bookkeeping. compatible_with is the migration's declaration
// (Migration.CompatibleWith), NULL when it made none.
const (
	migrationCreateTableSQL = `CREATE TABLE IF NOT EXISTS leasehold_migration (
	version         INT          NOT NULL PRIMARY KEY,
	name            VARCHAR(255) NOT NULL,
	applied_at      DATETIME(6)  NOT NULL,
	compatible_with INT          NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`
	// migrationAddCompatibleSQL brings a table created before
	// compatible_with existed up to date.
	migrationAddCompatibleSQL = `ALTER TABLE leasehold_migration ADD COLUMN compatible_with INT NULL`
	// migrationProbeSQL reports whether the bookkeeping table, the job
	// table and the compatible_with column exist in the current database.
	migrationProbeSQL = `SELECT
	EXISTS (SELECT 1 FROM information_schema.tables
	        WHERE table_schema = DATABASE() AND table_name = 'leasehold_migration'),
	EXISTS (SELECT 1 FROM information_schema.tables
	        WHERE table_schema = DATABASE() AND table_name = 'leasehold_job'),
	EXISTS (SELECT 1 FROM information_schema.columns
	        WHERE table_schema = DATABASE() AND table_name = 'leasehold_migration'
	          AND column_name = 'compatible_with')`
	migrationAppliedSQL  = `SELECT version FROM leasehold_migration ORDER BY version`
	migrationStateSQL    = `SELECT version, name, coalesce(compatible_with, 0) FROM leasehold_migration ORDER BY version`
	migrationStateOldSQL = `SELECT version, name, 0 FROM leasehold_migration ORDER BY version`
	migrationInsertSQL   = `INSERT INTO leasehold_migration (version, name, applied_at, compatible_with)
VALUES (?, ?, ` + nowExpr + `, nullif(?, 0))`
	migrationDeleteSQL = `DELETE FROM leasehold_migration WHERE version = ?`
)

// The migration lock is a named user lock (GET_LOCK) held by one dedicated
// connection for the whole run. Lock names are server-wide, so the name
// carries the database's; migrationLockName hashes it when the result would
// pass the 64 characters the servers allow.
const (
	migrationDatabaseSQL = `SELECT coalesce(DATABASE(), '')`
	migrationLockSQL     = `SELECT GET_LOCK(?, ?)`
	migrationUnlockSQL   = `SELECT RELEASE_LOCK(?)`
	// migrationLockHolderSQL finds the connection holding the lock and
	// where it comes from.
	migrationLockHolderSQL = `SELECT p.id, p.user, p.host
FROM information_schema.processlist p WHERE p.id = IS_USED_LOCK(?)`
)

// migrationLockName is the GET_LOCK name of database's migrations.
func migrationLockName(database string) string {
	name := "leasehold_migrate." + database
	if len(name) <= 64 {
		return name
	}
	h := fnv.New64a()
	h.Write([]byte(database))
	return fmt.Sprintf("leasehold_migrate.%x", h.Sum64())
}

// migrationProbe reads what migrationProbeSQL reports.
func migrationProbe(ctx context.Context, q querier) (recorded, jobTable, hasCompatible bool, err error) {
	if err := q.QueryRowContext(ctx, migrationProbeSQL).Scan(&recorded, &jobTable, &hasCompatible); err != nil {
		return false, false, false, fmt.Errorf("probe migration table: %w", translateError(err))
	}
	return recorded, jobTable, hasCompatible, nil
}

// MigrationApplied returns the applied migration versions in order, creating
// the leasehold_migration table when missing. CREATE TABLE commits any open
// transaction implicitly (MySQL DDL is not transactional), so call it on the
// pool, as package migrate does.
func (e *executor) MigrationApplied(ctx context.Context) ([]int, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	recorded, _, hasCompatible, err := migrationProbe(ctx, q)
	if err != nil {
		return nil, err
	}
	switch {
	case !recorded:
		if _, err := q.ExecContext(ctx, migrationCreateTableSQL); err != nil {
			return nil, fmt.Errorf("create migration table: %w", translateError(err))
		}
	case !hasCompatible:
		if _, err := q.ExecContext(ctx, migrationAddCompatibleSQL); err != nil {
			return nil, fmt.Errorf("update migration table: %w", translateError(err))
		}
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
		_, err = q.ExecContext(ctx, migrationInsertSQL, m.Version, m.Name, m.CompatibleWith())
	} else {
		_, err = q.ExecContext(ctx, migrationDeleteSQL, m.Version)
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

// MigrationLockHolder describes the connection holding the database's
// migration lock (IS_USED_LOCK and the process list: its ID, user and host), or returns "" when it
// is free.
func (d *Driver) MigrationLockHolder(ctx context.Context) (string, error) {
	var database string
	if err := d.db.QueryRowContext(ctx, migrationDatabaseSQL).Scan(&database); err != nil {
		return "", fmt.Errorf("read database: %w", translateError(err))
	}
	var (
		id         int64
		user, host string
	)
	err := d.db.QueryRowContext(ctx, migrationLockHolderSQL, migrationLockName(database)).Scan(&id, &user, &host)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read migration lock holder: %w", translateError(err))
	}
	return fmt.Sprintf("connection %d (%s@%s)", id, user, host), nil
}

// MigrationState reads the migration bookkeeping of the current database
// without creating anything.
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
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
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
		return nil, fmt.Errorf("read applied migrations: %w", translateError(err))
	}
	return st, nil
}

// migrationLockPoll is the pause between tries at the lock while another
// process holds it.
const migrationLockPoll = 100 * time.Millisecond

// MigrationLock takes the database's migration lock with GET_LOCK on a
// connection of its own, which keeps it until Release. A waiter tries
// without blocking (GET_LOCK with timeout 0) every migrationLockPoll and holds
// no connection in between, so waiters cannot take the pool from the holder,
// whose migrations run on the pool (MySQL DDL commits implicitly, so there is
// no transaction to hold the lock in): the pool needs two connections. Behind
// a proxy that multiplexes sessions (ProxySQL), the lock needs a direct
// connection, as does any session state.
func (d *Driver) MigrationLock(ctx context.Context, params *driver.MigrationLockParams) (driver.MigrationSession, error) {
	timeout := params.Timeout
	if timeout <= 0 {
		timeout = driver.DefaultMigrationLockTimeout
	}
	deadline := time.Now().Add(timeout)
	for {
		s, err := d.tryMigrationLock(ctx)
		if err != nil {
			return nil, err
		}
		if s.conn != nil {
			return s, nil
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w %q after %s: another migrate is running", driver.ErrMigrationLockTimeout, s.name, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take migration lock: %w", ctx.Err())
		case <-time.After(migrationLockPoll):
		}
	}
}

// tryMigrationLock tries GET_LOCK once. It returns a session with a nil conn
// when another session holds the lock.
func (d *Driver) tryMigrationLock(ctx context.Context) (*migrationSession, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("take migration lock: %w", translateError(err))
	}
	var database string
	if err := conn.QueryRowContext(ctx, migrationDatabaseSQL).Scan(&database); err != nil {
		conn.Close()
		return nil, fmt.Errorf("take migration lock: read database: %w", translateError(err))
	}
	name := migrationLockName(database)
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, migrationLockSQL, name, 0).Scan(&got); err != nil {
		discard(conn)
		return nil, fmt.Errorf("take migration lock: %w", translateError(err))
	}
	switch {
	case !got.Valid:
		discard(conn)
		return nil, fmt.Errorf("take migration lock %q: GET_LOCK returned NULL", name)
	case got.Int64 != 1:
		conn.Close()
		return &migrationSession{d: d, name: name}, nil
	}
	return &migrationSession{d: d, conn: conn, name: name}, nil
}

// discard closes conn without returning it to the pool, so that a lock it may
// hold ends with its session.
func discard(conn *sql.Conn) {
	conn.Raw(func(any) error { return sqldriver.ErrBadConn }) //nolint:errcheck // ErrBadConn is the point
	conn.Close()
}

// migrationSession is a connection holding the migration lock.
type migrationSession struct {
	d    *Driver
	conn *sql.Conn
	name string
}

func (s *migrationSession) Executor() driver.Executor { return s.d.GetExecutor() }

// Release releases the lock; the migrations committed as they ran. When
// RELEASE_LOCK fails the connection is closed instead, which releases it.
func (s *migrationSession) Release(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var released sql.NullInt64
	if err := s.conn.QueryRowContext(ctx, migrationUnlockSQL, s.name).Scan(&released); err != nil || released.Int64 != 1 {
		discard(s.conn)
		return nil
	}
	s.conn.Close()
	return nil
}
