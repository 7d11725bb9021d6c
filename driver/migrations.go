package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MigrationsFromFS reads migrations named NNN_name.up.sql and NNN_name.down.sql
// from the root of fsys. Backends embed their migrations folder and pass it here.
func MigrationsFromFS(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		name := e.Name()
		var up bool
		switch {
		case strings.HasSuffix(name, ".up.sql"):
			up = true
		case strings.HasSuffix(name, ".down.sql"):
		default:
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".up.sql"), ".down.sql")
		num, label, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version < 1 {
			return nil, fmt.Errorf("migration file %q: want NNN_name.up.sql or NNN_name.down.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Clean(name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: label}
			byVersion[version] = m
		}
		if up {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %d_%s: needs both an up and a down file", m.Version, m.Name)
		}
		if n, err := parseCompatibleWith(m.Up); err != nil {
			return nil, fmt.Errorf("migration %d_%s: %w", m.Version, m.Name, err)
		} else if n >= m.Version {
			return nil, fmt.Errorf("migration %d_%s: compatible-with %d must name an older version", m.Version, m.Name, n)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// compatibleWithPrefix starts the header line by which a migration declares
// the binaries that keep working once it is applied (see
// Migration.CompatibleWith).
const compatibleWithPrefix = "-- leasehold:compatible-with "

// CompatibleWith returns the oldest schema version a binary may know and
// still run against a database where m is applied: N when m's up SQL has a
// line "-- leasehold:compatible-with N" among its leading comment lines, 0
// when it has none (only binaries that know m itself). A migration that adds
// something old code never reads (a nullable column, an index) can declare
// the version before it; one that removes or renames what old code uses must
// not. The migrator records the declaration with the migration, so a binary
// that has never seen m can read it.
func (m Migration) CompatibleWith() int {
	n, _ := parseCompatibleWith(m.Up)
	return n
}

// parseCompatibleWith reads the compatible-with header of up SQL: among the
// leading lines that are blank or comments. It returns 0 when there is none.
func parseCompatibleWith(up string) (int, error) {
	for line := range strings.Lines(up) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "--") {
			return 0, nil
		}
		rest, ok := strings.CutPrefix(line, compatibleWithPrefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(rest))
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%q: want a version of 1 or more", line)
		}
		return n, nil
	}
	return 0, nil
}

// ErrMigrationLockTimeout is wrapped by MigrationLock when the lock was not
// free within the timeout: another process is migrating the same schema.
var ErrMigrationLockTimeout = errors.New("leasehold/driver: timed out waiting for the migration lock")

// DefaultMigrationLockTimeout is how long MigrationLock waits when
// MigrationLockParams.Timeout is zero: longer than any migration of this
// module takes on a large table.
const DefaultMigrationLockTimeout = 10 * time.Minute

// MigrationLocker is implemented by drivers that serialise migrations on a
// database lock, so that every replica of a deployment can run migrate up at
// once: one migrates, the others wait, then find nothing left to do. Every
// backend of this module implements it; package migrate uses it when the
// driver does.
type MigrationLocker interface {
	// MigrationLock waits up to Timeout for the migration lock of the
	// driver's schema (one lock per Postgres schema, MySQL database or
	// SQLite file; other schemas migrate in parallel) and returns it held.
	// The caller reads the applied versions and runs migrations on its
	// Executor, then calls Release. Waiting longer than Timeout returns an
	// error wrapping ErrMigrationLockTimeout; ctx ending returns ctx's error.
	MigrationLock(ctx context.Context, params *MigrationLockParams) (MigrationSession, error)
}

// MigrationLockParams configures MigrationLock.
type MigrationLockParams struct {
	// Timeout bounds the wait for the lock; zero means
	// DefaultMigrationLockTimeout.
	Timeout time.Duration
}

// MigrationSession is a held migration lock.
type MigrationSession interface {
	// Executor runs the migrations while the lock is held. Where DDL is
	// transactional (Postgres, SQLite) it is one transaction around the
	// whole run, which holds the lock (Begin on it opens a savepoint, so a
	// failed migration is undone alone); elsewhere (MySQL) it is the pool.
	Executor() Executor
	// Release commits what ran on Executor, where it is a transaction, and
	// releases the lock; call it exactly once. An error means that work was
	// not kept (the commit failed). The lock is released in every case.
	Release(ctx context.Context) error
}

// MigrationStateReader is implemented by drivers that can read the migration
// bookkeeping without changing anything, for the client's schema check at
// start (MigrationApplied creates the bookkeeping table, which is DDL that
// must not run from every client at once). Every backend of this module
// implements it.
type MigrationStateReader interface {
	// MigrationState reads what the database records of its migrations.
	MigrationState(ctx context.Context) (*MigrationState, error)
}

// MigrationState is the migration bookkeeping of a database.
type MigrationState struct {
	// Recorded reports whether the bookkeeping table exists.
	Recorded bool
	// JobTable reports whether the job table exists. A schema applied by
	// another migration tool from the .sql files has it without Recorded.
	JobTable bool
	// Applied are the recorded migrations in version order.
	Applied []AppliedMigration
}

// AppliedMigration is one recorded migration.
type AppliedMigration struct {
	// Version is the migration's number.
	Version int
	// Name describes it.
	Name string
	// CompatibleWith is the migration's declaration recorded when it was
	// applied (Migration.CompatibleWith): the oldest schema version a
	// binary may know and still run against it; 0 when it declared none.
	CompatibleWith int
}

// MigrationLockInspector is implemented by drivers that can say cheaply who
// holds the migration lock, for `leasehold migrate status`. Postgres and
// MySQL implement it; SQLite cannot tell.
type MigrationLockInspector interface {
	// MigrationLockHolder describes the session holding the migration lock
	// of the driver's schema in one line (process, client, since when), or
	// returns "" when the lock is free.
	MigrationLockHolder(ctx context.Context) (string, error)
}
