// Package migrate applies and reverts a backend's schema migrations. The CLI
// and the library use it; teams with their own migration tool can take the
// plain .sql files from each backend's migrations folder instead.
//
// Up, UpTo, Down and DownTo are safe to run from many processes at once, as
// every replica of a rolling deploy may: when the driver implements
// driver.MigrationLocker (every backend of this module does) each run takes
// the database's migration lock first — an advisory lock on Postgres,
// GET_LOCK on MySQL and MariaDB, the write lock on SQLite — and reads the
// applied versions only once it holds it. One process migrates; the others
// wait, then find nothing left to do and return no versions.
//
// On Postgres and SQLite the whole run is one transaction: either every
// migration it applied is kept or, when the commit fails, none. A migration
// that fails is undone alone (a savepoint) and the ones before it are kept.
// On MySQL each migration commits as it runs (DDL is not transactional).
package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// ErrUnknownVersion is returned when a target version is not a known migration.
var ErrUnknownVersion = errors.New("migrate: unknown migration version")

// Config configures a Migrator. The zero value is the default.
type Config struct {
	// LockTimeout bounds the wait for the migration lock while another
	// process migrates; zero means driver.DefaultMigrationLockTimeout (10
	// minutes). Past it, the run fails with an error wrapping
	// driver.ErrMigrationLockTimeout and changes nothing.
	LockTimeout time.Duration
}

// Migrator applies one backend's migrations.
type Migrator[TTx any] struct {
	driver     driver.Driver[TTx]
	migrations []driver.Migration
	cfg        Config
}

// New returns a migrator for the driver's migrations with the default Config.
func New[TTx any](d driver.Driver[TTx]) *Migrator[TTx] {
	return NewWithConfig(d, nil)
}

// NewWithConfig returns a migrator for the driver's migrations. cfg may be
// nil; it is copied.
func NewWithConfig[TTx any](d driver.Driver[TTx], cfg *Config) *Migrator[TTx] {
	ms := slices.Clone(d.Migrations())
	slices.SortFunc(ms, func(a, b driver.Migration) int { return a.Version - b.Version })
	m := &Migrator[TTx]{driver: d, migrations: ms}
	if cfg != nil {
		m.cfg = *cfg
	}
	return m
}

// Status is the state of one migration.
type Status struct {
	// Version is the migration's number.
	Version int `json:"version"`
	// Name describes it.
	Name string `json:"name"`
	// Applied reports whether it is applied.
	Applied bool `json:"applied"`
	// Unknown is set for a migration the database records as applied that
	// this binary does not have: the schema is newer than the binary.
	Unknown bool `json:"unknown,omitempty"`
	// CompatibleWith is, for an applied migration, the declaration recorded
	// with it (driver.Migration.CompatibleWith); for a pending one, the
	// declaration of this binary's file. 0 when none.
	CompatibleWith int `json:"compatible_with,omitempty"`
}

// Latest returns the highest known migration version.
func (m *Migrator[TTx]) Latest() int {
	if len(m.migrations) == 0 {
		return 0
	}
	return m.migrations[len(m.migrations)-1].Version
}

// Known reports whether version is one of the driver's migrations.
func (m *Migrator[TTx]) Known(version int) bool {
	return slices.ContainsFunc(m.migrations, func(mig driver.Migration) bool { return mig.Version == version })
}

// Status lists every known migration and whether it is applied, then any
// applied migration this binary does not know (Unknown), in version order.
// With a driver.MigrationStateReader it changes nothing in the database.
func (m *Migrator[TTx]) Status(ctx context.Context) ([]Status, error) {
	var applied []driver.AppliedMigration
	if r, ok := m.driver.(driver.MigrationStateReader); ok {
		st, err := r.MigrationState(ctx)
		if err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		applied = st.Applied
	} else {
		versions, err := m.driver.GetExecutor().MigrationApplied(ctx)
		if err != nil {
			return nil, fmt.Errorf("read applied migrations: %w", err)
		}
		for _, v := range versions {
			applied = append(applied, driver.AppliedMigration{Version: v})
		}
	}
	byVersion := map[int]driver.AppliedMigration{}
	for _, a := range applied {
		byVersion[a.Version] = a
	}
	out := make([]Status, 0, len(m.migrations))
	for _, mig := range m.migrations {
		s := Status{Version: mig.Version, Name: mig.Name, CompatibleWith: mig.CompatibleWith()}
		if a, ok := byVersion[mig.Version]; ok {
			s.Applied, s.CompatibleWith = true, a.CompatibleWith
		}
		out = append(out, s)
	}
	for _, a := range applied {
		if !m.Known(a.Version) {
			out = append(out, Status{Version: a.Version, Name: a.Name, Applied: true, Unknown: true, CompatibleWith: a.CompatibleWith})
		}
	}
	slices.SortStableFunc(out, func(a, b Status) int { return a.Version - b.Version })
	return out, nil
}

// Up applies every migration not yet applied, oldest first, and returns the
// versions it applied: none when another process applied them first.
func (m *Migrator[TTx]) Up(ctx context.Context) ([]int, error) {
	return m.UpTo(ctx, m.Latest())
}

// UpTo applies migrations up to and including version target.
func (m *Migrator[TTx]) UpTo(ctx context.Context, target int) ([]int, error) {
	if target != 0 && !m.Known(target) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownVersion, target)
	}
	return m.locked(ctx, func(exec driver.Executor, applied []int) ([]int, error) {
		var done []int
		for _, mig := range m.migrations {
			if mig.Version > target || slices.Contains(applied, mig.Version) {
				continue
			}
			if err := m.run(ctx, exec, mig, true); err != nil {
				return done, err
			}
			done = append(done, mig.Version)
		}
		return done, nil
	})
}

// Down reverts the most recently applied migration, if any, and returns the
// version it reverted (nil when none was applied).
func (m *Migrator[TTx]) Down(ctx context.Context) ([]int, error) {
	return m.locked(ctx, func(exec driver.Executor, applied []int) ([]int, error) {
		if len(applied) == 0 {
			return nil, nil
		}
		return m.down(ctx, exec, applied, applied[len(applied)-1]-1)
	})
}

// DownTo reverts applied migrations newer than version target, newest first.
// DownTo(ctx, 0) removes the whole schema.
func (m *Migrator[TTx]) DownTo(ctx context.Context, target int) ([]int, error) {
	if target != 0 && !m.Known(target) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownVersion, target)
	}
	return m.locked(ctx, func(exec driver.Executor, applied []int) ([]int, error) {
		return m.down(ctx, exec, applied, target)
	})
}

func (m *Migrator[TTx]) down(ctx context.Context, exec driver.Executor, applied []int, target int) ([]int, error) {
	var done []int
	for i := len(m.migrations) - 1; i >= 0; i-- {
		mig := m.migrations[i]
		if mig.Version <= target || !slices.Contains(applied, mig.Version) {
			continue
		}
		if err := m.run(ctx, exec, mig, false); err != nil {
			return done, err
		}
		done = append(done, mig.Version)
	}
	return done, nil
}

// locked runs fn with the migration lock held (when the driver has one) and
// the applied versions read under it. It returns the versions fn changed
// that were kept: none when the final commit failed.
func (m *Migrator[TTx]) locked(ctx context.Context, fn func(exec driver.Executor, applied []int) ([]int, error)) ([]int, error) {
	locker, ok := m.driver.(driver.MigrationLocker)
	if !ok {
		return m.withApplied(ctx, m.driver.GetExecutor(), fn)
	}
	lock, err := locker.MigrationLock(ctx, &driver.MigrationLockParams{Timeout: m.cfg.LockTimeout})
	if err != nil {
		return nil, err
	}
	done, err := m.withApplied(ctx, lock.Executor(), fn)
	if rerr := lock.Release(ctx); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	return done, err
}

func (m *Migrator[TTx]) withApplied(ctx context.Context, exec driver.Executor, fn func(exec driver.Executor, applied []int) ([]int, error)) ([]int, error) {
	applied, err := exec.MigrationApplied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	return fn(exec, applied)
}

// run applies (up) or reverts one migration in a transaction of its own on
// exec: a savepoint when exec is the lock's transaction.
func (m *Migrator[TTx]) run(ctx context.Context, exec driver.Executor, mig driver.Migration, up bool) error {
	direction, sql := "up", mig.Up
	if !up {
		direction, sql = "down", mig.Down
	}
	tx, err := exec.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin migration %d %s: %w", mig.Version, direction, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if err := tx.Exec(ctx, sql); err != nil {
		return fmt.Errorf("run migration %d_%s %s: %w", mig.Version, mig.Name, direction, err)
	}
	if err := tx.MigrationRecord(ctx, &driver.MigrationRecordParams{Migration: mig, Up: up}); err != nil {
		return fmt.Errorf("record migration %d %s: %w", mig.Version, direction, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit migration %d %s: %w", mig.Version, direction, err)
	}
	return nil
}
