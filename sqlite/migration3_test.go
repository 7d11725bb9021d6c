package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// openAtVersion opens a new database file migrated up to version v, and
// its migrator.
func openAtVersion(t *testing.T, v int) (*Driver, *sql.DB, *migrate.Migrator[*sql.Tx]) {
	t.Helper()
	d, db, err := Open(filepath.Join(t.TempDir(), "leasehold.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := migrate.New(d)
	if _, err := m.UpTo(context.Background(), v); err != nil {
		t.Fatalf("up to %d: %v", v, err)
	}
	return d, db, m
}

// TestMigration3WithJobs applies migration 3 to a version-2 table that
// already holds jobs, and reverts it with the new columns set: SQLite's ADD
// COLUMN checks existing rows, and DROP COLUMN refuses a column an index
// still names.
func TestMigration3WithJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, db, m := openAtVersion(t, 2)
	if _, err := db.ExecContext(ctx, `INSERT INTO leasehold_job
		(kind, queue, state, args, unique_key, max_attempts, scheduled_at, created_at, finalized_at)
		VALUES ('k', 'q', 'completed', '{}', 'key', 1, 0, 0, 0), ('k', 'q', 'available', '{}', 'key', 1, 0, 0, NULL)`); err != nil {
		t.Fatalf("insert at version 2: %v", err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up to 3: %v", err)
	}
	exec := d.GetExecutor()
	jobs, err := exec.JobList(ctx, &driver.JobListParams{})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("jobs after up = %v, %v", jobs, err)
	}

	// Leave the new columns set on a row, then revert.
	claimed, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1, Owner: "o", DefaultLeaseTTL: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if _, running, err := exec.JobCancelRunning(ctx, &driver.JobCancelRunningParams{ID: claimed[0].ID}); err != nil || !running {
		t.Fatalf("cancel = %v, %v", running, err)
	}
	held := &driver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1, EncodedArgs: []byte("{}"),
		Metadata: []byte("{}"), MaxAttempts: 1, UniqueKey: "other",
		UniqueFinished: []leasetype.JobState{leasetype.JobStateCompleted}}
	if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{held}}); err != nil {
		t.Fatalf("insert with unique_finished: %v", err)
	}
	if _, err := m.DownTo(ctx, 2); err != nil {
		t.Fatalf("down to 2: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM pragma_table_info('leasehold_job')
		WHERE name IN ('cancel_requested_at', 'unique_finished')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("new columns after down = %d, %v; want 0", n, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema
		WHERE name IN ('leasehold_limit', 'leasehold_leader', 'leasehold_periodic',
			'leasehold_job_running_kind_idx',
			'leasehold_job_cancel_idx', 'leasehold_job_finalized_idx')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("new tables and indexes after down = %d, %v; want 0", n, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasehold_job`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("jobs after down = %d, %v; want 3", n, err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up to 3 again: %v", err)
	}
}
