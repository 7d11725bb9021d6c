// Package migrate applies and reverts a backend's schema migrations. The CLI
// and the library use it; teams with their own migration tool can take the
// plain .sql files from each backend's migrations folder instead.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
)

// ErrUnknownVersion is returned when a target version is not a known migration.
var ErrUnknownVersion = errors.New("migrate: unknown migration version")

// Migrator applies one backend's migrations.
type Migrator[TTx any] struct {
	driver     driver.Driver[TTx]
	migrations []driver.Migration
}

// New returns a migrator for the driver's migrations.
func New[TTx any](d driver.Driver[TTx]) *Migrator[TTx] {
	ms := slices.Clone(d.Migrations())
	slices.SortFunc(ms, func(a, b driver.Migration) int { return a.Version - b.Version })
	return &Migrator[TTx]{driver: d, migrations: ms}
}

// Status is the state of one migration.
type Status struct {
	// Version is the migration's number.
	Version int `json:"version"`
	// Name describes it.
	Name string `json:"name"`
	// Applied reports whether it is applied.
	Applied bool `json:"applied"`
}

// Latest returns the highest known migration version.
func (m *Migrator[TTx]) Latest() int {
	if len(m.migrations) == 0 {
		return 0
	}
	return m.migrations[len(m.migrations)-1].Version
}

// Status lists every known migration and whether it is applied.
func (m *Migrator[TTx]) Status(ctx context.Context) ([]Status, error) {
	applied, err := m.driver.GetExecutor().MigrationApplied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	out := make([]Status, 0, len(m.migrations))
	for _, mig := range m.migrations {
		out = append(out, Status{Version: mig.Version, Name: mig.Name, Applied: slices.Contains(applied, mig.Version)})
	}
	return out, nil
}

// Up applies every migration not yet applied, each in its own transaction,
// and returns the versions it applied.
func (m *Migrator[TTx]) Up(ctx context.Context) ([]int, error) {
	return m.UpTo(ctx, m.Latest())
}

// UpTo applies migrations up to and including version target.
func (m *Migrator[TTx]) UpTo(ctx context.Context, target int) ([]int, error) {
	if target != 0 && !m.known(target) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownVersion, target)
	}
	applied, err := m.driver.GetExecutor().MigrationApplied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	var done []int
	for _, mig := range m.migrations {
		if mig.Version > target || slices.Contains(applied, mig.Version) {
			continue
		}
		if err := m.run(ctx, mig, true); err != nil {
			return done, err
		}
		done = append(done, mig.Version)
	}
	return done, nil
}

// Down reverts the most recently applied migration, if any, and returns the
// version it reverted (nil when none was applied).
func (m *Migrator[TTx]) Down(ctx context.Context) ([]int, error) {
	applied, err := m.driver.GetExecutor().MigrationApplied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	if len(applied) == 0 {
		return nil, nil
	}
	return m.DownTo(ctx, applied[len(applied)-1]-1)
}

// DownTo reverts applied migrations newer than version target, newest first.
// DownTo(ctx, 0) removes the whole schema.
func (m *Migrator[TTx]) DownTo(ctx context.Context, target int) ([]int, error) {
	if target != 0 && !m.known(target) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownVersion, target)
	}
	applied, err := m.driver.GetExecutor().MigrationApplied(ctx)
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	var done []int
	for i := len(m.migrations) - 1; i >= 0; i-- {
		mig := m.migrations[i]
		if mig.Version <= target || !slices.Contains(applied, mig.Version) {
			continue
		}
		if err := m.run(ctx, mig, false); err != nil {
			return done, err
		}
		done = append(done, mig.Version)
	}
	return done, nil
}

func (m *Migrator[TTx]) known(version int) bool {
	return slices.ContainsFunc(m.migrations, func(mig driver.Migration) bool { return mig.Version == version })
}

func (m *Migrator[TTx]) run(ctx context.Context, mig driver.Migration, up bool) error {
	direction, sql := "up", mig.Up
	if !up {
		direction, sql = "down", mig.Down
	}
	tx, err := m.driver.GetExecutor().Begin(ctx)
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
