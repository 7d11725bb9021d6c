package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// exerciseMigrate specifies the migration bookkeeping and that the driver's
// migrations revert and reapply cleanly.
func exerciseMigrate[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	applied := func(t *testing.T, exec driver.Executor) []int {
		t.Helper()
		v, err := exec.MigrationApplied(t.Context())
		if err != nil {
			t.Fatalf("MigrationApplied: %v", err)
		}
		return v
	}
	assertStatus := func(t *testing.T, m *migrate.Migrator[TTx], ms []driver.Migration, want bool) {
		t.Helper()
		status, err := m.Status(t.Context())
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if len(status) != len(ms) {
			t.Fatalf("Status lists %d migrations, want %d", len(status), len(ms))
		}
		for i, s := range status {
			if s.Version != ms[i].Version || s.Name != ms[i].Name || s.Applied != want {
				t.Errorf("Status[%d] = %+v, want version %d name %s applied %v", i, s, ms[i].Version, ms[i].Name, want)
			}
		}
	}

	t.Run("Migrations", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		ms := d.Migrations()
		if len(ms) == 0 {
			t.Fatalf("Migrations() is empty")
		}
		for i, m := range ms {
			if m.Version != i+1 || m.Name == "" || m.Up == "" || m.Down == "" {
				t.Errorf("migration %d: version %d name %q, up %d bytes, down %d bytes; want version %d and all set",
					i, m.Version, m.Name, len(m.Up), len(m.Down), i+1)
			}
		}
	})

	t.Run("AppliedAfterSetup", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		want := versions(d.Migrations())
		if got := applied(t, exec); !slices.Equal(got, want) {
			t.Errorf("MigrationApplied = %v, want %v", got, want)
		}
		assertStatus(t, migrate.New(d), d.Migrations(), true)
		if got, err := migrate.New(d).Up(t.Context()); err != nil || len(got) != 0 {
			t.Errorf("Up on a migrated database applied %v (err %v), want nothing", got, err)
		}
	})

	t.Run("DownToZeroAndUp", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		ms := d.Migrations()
		all := versions(ms)
		m := migrate.New(d)

		down, err := m.DownTo(t.Context(), 0)
		if err != nil {
			t.Fatalf("DownTo(0): %v", err)
		}
		reversed := slices.Clone(all)
		slices.Reverse(reversed)
		if !slices.Equal(down, reversed) {
			t.Errorf("DownTo(0) reverted %v, want %v", down, reversed)
		}
		if got := applied(t, exec); len(got) != 0 {
			t.Errorf("MigrationApplied after DownTo(0) = %v, want none", got)
		}
		assertStatus(t, m, ms, false)
		if _, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{jobParams("k", "q")}}); err == nil {
			t.Errorf("JobInsertMany with the schema removed: got no error")
		}

		up, err := m.Up(t.Context())
		if err != nil {
			t.Fatalf("Up: %v", err)
		}
		if !slices.Equal(up, all) {
			t.Errorf("Up applied %v, want %v", up, all)
		}
		if got := applied(t, exec); !slices.Equal(got, all) {
			t.Errorf("MigrationApplied after Up = %v, want %v", got, all)
		}
		assertStatus(t, m, ms, true)

		// The schema works again end to end.
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		assertSameIDs(t, "finished", mustFinish(t, exec, "w", completeItem(job)), []int64{job.ID})
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateCompleted {
			t.Errorf("state = %s, want completed", got.State)
		}
	})

	// Two full rounds from an empty database: without the bookkeeping table
	// MigrationApplied creates it and reports nothing; Up applies every
	// migration and a second Up nothing; DownTo(0) removes the tables the
	// migrations created.
	t.Run("RoundTripFromEmpty", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		all := versions(d.Migrations())
		reversed := slices.Clone(all)
		slices.Reverse(reversed)
		m := migrate.New(d)
		if down, err := m.DownTo(t.Context(), 0); err != nil || !slices.Equal(down, reversed) {
			t.Fatalf("DownTo(0) = %v, %v; want %v", down, err, reversed)
		}
		if err := exec.Exec(t.Context(), "DROP TABLE leasehold_migration"); err != nil {
			t.Fatalf("drop the bookkeeping table: %v", err)
		}
		if got := applied(t, exec); len(got) != 0 {
			t.Fatalf("MigrationApplied without its table = %v, want none", got)
		}
		for round := range 2 {
			if up, err := m.Up(t.Context()); err != nil || !slices.Equal(up, all) {
				t.Fatalf("round %d: Up = %v, %v; want %v", round, up, err, all)
			}
			if up, err := m.Up(t.Context()); err != nil || len(up) != 0 {
				t.Fatalf("round %d: second Up = %v, %v; want nothing", round, up, err)
			}
			job := mustInsertOne(t, exec, jobParams("k", "q"))
			if _, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: job.ID}); err != nil {
				t.Fatalf("round %d: JobAttempts after Up: %v", round, err)
			}
			if down, err := m.DownTo(t.Context(), 0); err != nil || !slices.Equal(down, reversed) {
				t.Fatalf("round %d: DownTo(0) = %v, %v; want %v", round, down, err, reversed)
			}
			if got := applied(t, exec); len(got) != 0 {
				t.Fatalf("round %d: MigrationApplied after DownTo(0) = %v, want none", round, got)
			}
			// Each read below needs a table a migration created.
			if _, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: job.ID}); err == nil {
				t.Errorf("round %d: JobGet after DownTo(0): no error", round)
			}
			if _, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: job.ID}); err == nil {
				t.Errorf("round %d: JobAttempts after DownTo(0): no error", round)
			}
			if _, err := exec.QueueList(t.Context()); err == nil {
				t.Errorf("round %d: QueueList after DownTo(0): no error", round)
			}
			if _, err := exec.PeriodicList(t.Context()); err == nil {
				t.Errorf("round %d: PeriodicList after DownTo(0): no error", round)
			}
			if _, err := exec.LeaderAttempt(t.Context(), &driver.LeaderParams{Name: "l", Owner: "o", TTL: time.Minute}); err == nil {
				t.Errorf("round %d: LeaderAttempt after DownTo(0): no error", round)
			}
		}
		if up, err := m.Up(t.Context()); err != nil || !slices.Equal(up, all) {
			t.Fatalf("final Up = %v, %v; want %v", up, err, all)
		}
	})

	t.Run("DownOneStep", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		all := versions(d.Migrations())
		m := migrate.New(d)
		down, err := m.Down(t.Context())
		if err != nil {
			t.Fatalf("Down: %v", err)
		}
		if want := all[len(all)-1:]; !slices.Equal(down, want) {
			t.Errorf("Down reverted %v, want %v", down, want)
		}
		if got := applied(t, exec); !slices.Equal(got, all[:len(all)-1]) {
			t.Errorf("MigrationApplied after Down = %v, want %v", got, all[:len(all)-1])
		}
		if up, err := m.Up(t.Context()); err != nil || !slices.Equal(up, all[len(all)-1:]) {
			t.Errorf("Up after Down applied %v (err %v), want %v", up, err, all[len(all)-1:])
		}
	})

	exerciseMigrateLock(t, b)
}
