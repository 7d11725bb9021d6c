package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
)

// concurrentMigrators is how many migrators race on one empty schema.
const concurrentMigrators = 8

// exerciseMigrateLock specifies driver.MigrationLocker and
// driver.MigrationStateReader: migrations from many processes at once are
// serialised on a database lock and applied once, the bookkeeping records
// each migration's compatible-with declaration, and it can be read without
// changing anything.
func exerciseMigrateLock[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("ConcurrentUpFromEmpty", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		emptySchema(t, d)
		all := versions(d.Migrations())
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			done []int
			errs []error
		)
		start := make(chan struct{})
		for range concurrentMigrators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				applied, err := migrate.New(d).Up(t.Context())
				mu.Lock()
				defer mu.Unlock()
				done = append(done, applied...)
				if err != nil {
					errs = append(errs, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d of %d concurrent Up failed, first: %v", len(errs), concurrentMigrators, errs[0])
		}
		slices.Sort(done)
		if !slices.Equal(done, all) {
			t.Fatalf("concurrent Up applied %v between them, want each of %v exactly once", done, all)
		}
		if got := stateVersions(t, d); !slices.Equal(got, all) {
			t.Fatalf("MigrationState after concurrent Up = %v, want %v", got, all)
		}
		mustInsertOne(t, d.GetExecutor(), jobParams("k", "q"))
	})

	t.Run("UpWaitsForLockHolder", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		locker := mustLocker(t, d)
		held, err := locker.MigrationLock(t.Context(), &driver.MigrationLockParams{})
		if err != nil {
			t.Fatalf("MigrationLock: %v", err)
		}
		type result struct {
			done []int
			err  error
		}
		got := make(chan result, 1)
		go func() {
			done, err := migrate.New(d).Up(t.Context())
			got <- result{done, err}
		}()
		select {
		case r := <-got:
			held.Release(t.Context()) //nolint:errcheck // failing anyway
			t.Fatalf("Up returned %v, %v while another session held the migration lock", r.done, r.err)
		case <-time.After(300 * time.Millisecond):
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		select {
		case r := <-got:
			if r.err != nil || len(r.done) != 0 {
				t.Fatalf("Up after the holder released = %v, %v; want nothing applied, no error", r.done, r.err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("Up still waiting 15 s after the lock was released")
		}
	})

	t.Run("LockTimeout", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		locker := mustLocker(t, d)
		held, err := locker.MigrationLock(t.Context(), &driver.MigrationLockParams{})
		if err != nil {
			t.Fatalf("MigrationLock: %v", err)
		}
		defer held.Release(t.Context()) //nolint:errcheck // released below on success
		begin := time.Now()
		_, err = migrate.NewWithConfig(d, &migrate.Config{LockTimeout: 200 * time.Millisecond}).Up(t.Context())
		if !errors.Is(err, driver.ErrMigrationLockTimeout) {
			t.Fatalf("Up while the lock is held, 200 ms timeout: err = %v, want ErrMigrationLockTimeout", err)
		}
		if waited := time.Since(begin); waited < 150*time.Millisecond {
			t.Errorf("Up gave up after %s, before its 200 ms timeout", waited)
		}
		if err := held.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		again, err := locker.MigrationLock(t.Context(), &driver.MigrationLockParams{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("MigrationLock after release: %v", err)
		}
		if err := again.Release(t.Context()); err != nil {
			t.Fatalf("Release: %v", err)
		}
	})

	t.Run("StateReadOnly", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		reader := mustStateReader(t, d)
		emptySchema(t, d)
		for range 2 {
			st, err := reader.MigrationState(t.Context())
			if err != nil {
				t.Fatalf("MigrationState on an empty schema: %v", err)
			}
			if st.Recorded || st.JobTable || len(st.Applied) != 0 {
				t.Fatalf("MigrationState on an empty schema = %+v, want nothing (and no table created)", st)
			}
		}
		if _, err := migrate.New(d).Up(t.Context()); err != nil {
			t.Fatalf("Up: %v", err)
		}
		st, err := reader.MigrationState(t.Context())
		if err != nil || !st.Recorded || !st.JobTable {
			t.Fatalf("MigrationState after Up = %+v, %v; want recorded with the job table", st, err)
		}
		for i, a := range st.Applied {
			if m := d.Migrations()[i]; a.Version != m.Version || a.Name != m.Name || a.CompatibleWith != m.CompatibleWith() {
				t.Errorf("Applied[%d] = %+v, want version %d name %s compatible-with %d", i, a, m.Version, m.Name, m.CompatibleWith())
			}
		}
	})

	// A newer binary's migration records its declaration; an older binary
	// reads it back (Status lists it as unknown); a bookkeeping table from
	// before the declaration column still reads and is brought up to date.
	t.Run("CompatibleWithRecorded", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		latest := migrate.New(d).Latest()
		newer := withExtraMigration(d, latest)
		if done, err := migrate.New(newer).Up(t.Context()); err != nil || !slices.Equal(done, []int{latest + 1}) {
			t.Fatalf("Up with a newer migration = %v, %v; want [%d]", done, err, latest+1)
		}
		st, err := mustStateReader(t, d).MigrationState(t.Context())
		if err != nil {
			t.Fatalf("MigrationState: %v", err)
		}
		last := st.Applied[len(st.Applied)-1]
		if last.Version != latest+1 || last.Name != "extra" || last.CompatibleWith != latest {
			t.Fatalf("newest applied = %+v, want version %d name extra compatible-with %d", last, latest+1, latest)
		}
		status, err := migrate.New(d).Status(t.Context())
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if s := status[len(status)-1]; s.Version != latest+1 || !s.Applied || !s.Unknown || s.CompatibleWith != latest {
			t.Fatalf("Status of the unknown migration = %+v", s)
		}

		if err := d.GetExecutor().Exec(t.Context(), "ALTER TABLE leasehold_migration DROP COLUMN compatible_with"); err != nil {
			t.Fatalf("drop the declaration column: %v", err)
		}
		st, err = mustStateReader(t, d).MigrationState(t.Context())
		if err != nil || len(st.Applied) != latest+1 || st.Applied[latest].CompatibleWith != 0 {
			t.Fatalf("MigrationState on a table without the column = %+v, %v", st, err)
		}
		if done, err := migrate.New(newer).DownTo(t.Context(), latest); err != nil || !slices.Equal(done, []int{latest + 1}) {
			t.Fatalf("DownTo(%d) = %v, %v", latest, done, err)
		}
		if done, err := migrate.New(newer).Up(t.Context()); err != nil || len(done) != 1 {
			t.Fatalf("Up on an old bookkeeping table = %v, %v", done, err)
		}
		st, err = mustStateReader(t, d).MigrationState(t.Context())
		if err != nil || st.Applied[latest].CompatibleWith != latest {
			t.Fatalf("MigrationState after Up on an old table = %+v, %v; want the declaration recorded", st, err)
		}
	})
}

// testClientSchemaCheck: Start refuses a schema older than the driver's
// migrations and one with newer migrations not declared compatible, with one
// line and errors matching ErrSchemaOutdated and ErrSchemaTooNew; a newer
// schema declared compatible starts with a warning.
func testClientSchemaCheck[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	d := env.d
	latest := migrate.New(d).Latest()
	workers := func() *leasehold.Workers {
		w := leasehold.NewWorkers()
		leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(context.Context, *leasehold.Job[testArgs]) error { return nil }))
		return w
	}
	var logs lockedBuffer
	start := func(d driver.Driver[TTx]) error {
		t.Helper()
		c, err := leasehold.NewClient(d, testConfig(leasehold.Config{Workers: workers(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
		if err != nil {
			t.Fatalf("NewClient: %v", err)
		}
		if err := c.Start(t.Context()); err != nil {
			if cerr := c.CheckSchema(t.Context()); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("CheckSchema = %v, want Start's error %v", cerr, err)
			}
			return err
		}
		if err := c.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		return nil
	}
	oneLine := func(err error, want string) {
		t.Helper()
		if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), want) {
			t.Errorf("Start: %q, want one line containing %q", err, want)
		}
	}

	if err := start(d); err != nil {
		t.Fatalf("Start on the current schema: %v", err)
	}

	if _, err := migrate.New(d).Down(t.Context()); err != nil {
		t.Fatalf("Down: %v", err)
	}
	err := start(d)
	if !errors.Is(err, leasehold.ErrSchemaOutdated) {
		t.Fatalf("Start one migration behind: %v, want ErrSchemaOutdated", err)
	}
	oneLine(err, fmt.Sprintf("schema at version %d, this binary needs %d: run `leasehold migrate up`", latest-1, latest))

	undeclared := withExtraMigration(d, 0)
	if _, err := migrate.New(undeclared).Up(t.Context()); err != nil {
		t.Fatalf("Up with a newer migration: %v", err)
	}
	err = start(d)
	if !errors.Is(err, leasehold.ErrSchemaTooNew) {
		t.Fatalf("Start under an undeclared newer migration: %v, want ErrSchemaTooNew", err)
	}
	oneLine(err, fmt.Sprintf("schema at version %d, this binary knows up to %d", latest+1, latest))
	if err := start(undeclared); err != nil {
		t.Fatalf("Start of the binary that knows the newer migration: %v", err)
	}

	if _, err := migrate.New(undeclared).DownTo(t.Context(), latest); err != nil {
		t.Fatalf("DownTo(%d): %v", latest, err)
	}
	if _, err := migrate.New(withExtraMigration(d, latest)).Up(t.Context()); err != nil {
		t.Fatalf("Up with a compatible newer migration: %v", err)
	}
	if err := start(d); err != nil {
		t.Fatalf("Start under a newer migration declared compatible: %v", err)
	}
	if want := fmt.Sprintf("schema at version %d is newer than this binary (%d)", latest+1, latest); !strings.Contains(logs.String(), want) {
		t.Errorf("log %q, want a warning containing %q", logs.String(), want)
	}
}

func versions(ms []driver.Migration) []int {
	out := make([]int, len(ms))
	for i, m := range ms {
		out[i] = m.Version
	}
	return out
}

// emptySchema reverts every migration and drops the bookkeeping table, as in
// a database that was never migrated.
func emptySchema[TTx any](t *testing.T, d driver.Driver[TTx]) {
	t.Helper()
	if _, err := migrate.New(d).DownTo(t.Context(), 0); err != nil {
		t.Fatalf("DownTo(0): %v", err)
	}
	if err := d.GetExecutor().Exec(t.Context(), "DROP TABLE leasehold_migration"); err != nil {
		t.Fatalf("drop the bookkeeping table: %v", err)
	}
}

func mustLocker[TTx any](t *testing.T, d driver.Driver[TTx]) driver.MigrationLocker {
	t.Helper()
	l, ok := d.(driver.MigrationLocker)
	if !ok {
		t.Fatalf("%T does not implement driver.MigrationLocker", d)
	}
	return l
}

func mustStateReader[TTx any](t *testing.T, d driver.Driver[TTx]) driver.MigrationStateReader {
	t.Helper()
	r, ok := d.(driver.MigrationStateReader)
	if !ok {
		t.Fatalf("%T does not implement driver.MigrationStateReader", d)
	}
	return r
}

func stateVersions[TTx any](t *testing.T, d driver.Driver[TTx]) []int {
	t.Helper()
	st, err := mustStateReader(t, d).MigrationState(t.Context())
	if err != nil {
		t.Fatalf("MigrationState: %v", err)
	}
	out := []int{}
	for _, a := range st.Applied {
		out = append(out, a.Version)
	}
	return out
}

// extraMigrationDriver is d as a newer binary sees it: one more migration,
// which changes nothing (so that it runs on any backend and schema setup).
type extraMigrationDriver[TTx any] struct {
	driver.Driver[TTx]
	extra driver.Migration
}

// withExtraMigration returns d with a migration after its latest, declared
// compatible with version compatibleWith (none when 0).
func withExtraMigration[TTx any](d driver.Driver[TTx], compatibleWith int) *extraMigrationDriver[TTx] {
	ms := d.Migrations()
	up := "SELECT 1"
	if compatibleWith > 0 {
		up = fmt.Sprintf("-- A newer binary's migration.\n-- leasehold:compatible-with %d\n%s", compatibleWith, up)
	}
	return &extraMigrationDriver[TTx]{Driver: d, extra: driver.Migration{
		Version: ms[len(ms)-1].Version + 1, Name: "extra", Up: up, Down: "SELECT 1",
	}}
}

func (d *extraMigrationDriver[TTx]) Migrations() []driver.Migration {
	return append(d.Driver.Migrations(), d.extra)
}

func (d *extraMigrationDriver[TTx]) MigrationLock(ctx context.Context, params *driver.MigrationLockParams) (driver.MigrationSession, error) {
	return d.Driver.(driver.MigrationLocker).MigrationLock(ctx, params)
}

func (d *extraMigrationDriver[TTx]) MigrationState(ctx context.Context) (*driver.MigrationState, error) {
	return d.Driver.(driver.MigrationStateReader).MigrationState(ctx)
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
