package sqlite

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
)

// TestMigration11WithJobs applies migration 11 to a version-10 file that
// holds jobs with and without a key and attempt rows, and reverts it: the
// rebuilt attempt table keeps every row both ways, and a plain claim
// merges the claim index's two groups in claim order.
func TestMigration11WithJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, db, m := openAtVersion(t, 10)
	// IDs 1-4 claimable; claim order B (1), A (2), D (4), then C (3),
	// which has the lower priority. Job 5 is completed, with two attempts.
	if _, err := db.ExecContext(ctx, `INSERT INTO leasehold_job
		(id, kind, queue, state, priority, args, flow_key, max_attempts, scheduled_at, created_at, finalized_at)
		VALUES (1, 'k', 'q', 'available', 1, '{}', 'b', 5, 5, 0, NULL),
			(2, 'k', 'q', 'available', 1, '{}', NULL, 5, 10, 0, NULL),
			(3, 'k', 'q', 'available', 2, '{}', NULL, 5, 1, 0, NULL),
			(4, 'k', 'q', 'retryable', 1, '{}', 'd', 5, 20, 0, NULL),
			(5, 'k', 'q', 'completed', 1, '{}', NULL, 5, 0, 0, 30)`); err != nil {
		t.Fatalf("insert jobs at version 10: %v", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO leasehold_attempt
		(job_id, attempt, token, owner, leased_at, lease_until, heartbeats, finished_at, outcome, error)
		VALUES (5, 1, 1, 'o', 0, 10, 0, 11, 'failed', 'boom'), (5, 2, 2, 'o', 12, 22, 1, 25, 'completed', NULL)`); err != nil {
		t.Fatalf("insert attempts at version 10: %v", err)
	}
	exec := d.GetExecutor()
	checkAttempts := func(when string) {
		t.Helper()
		got, err := exec.JobAttempts(ctx, &driver.JobAttemptsParams{JobID: 5})
		if err != nil || len(got) != 2 {
			t.Fatalf("%s: attempts of job 5 = %d, %v; want 2", when, len(got), err)
		}
		if got[0].Token != 1 || got[0].Outcome != "failed" || got[0].Error != "boom" ||
			got[1].Token != 2 || got[1].Outcome != "completed" || got[1].Heartbeats != 1 {
			t.Errorf("%s: attempts of job 5 = %+v, %+v", when, got[0], got[1])
		}
	}
	tableSQL := func() string {
		t.Helper()
		var s string
		if err := db.QueryRowContext(ctx, `SELECT sql FROM sqlite_schema WHERE name = 'leasehold_attempt'`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up to 11: %v", err)
	}
	checkAttempts("after up")
	if !strings.Contains(tableSQL(), "WITHOUT ROWID") {
		t.Errorf("attempt table after up: %s, want WITHOUT ROWID", tableSQL())
	}
	claimed, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 3, Owner: "o", DefaultLeaseTTL: time.Minute})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	var ids []int64
	for _, j := range claimed {
		ids = append(ids, j.ID)
	}
	if want := []int64{1, 2, 4}; !slices.Equal(ids, want) {
		t.Errorf("claim of 3 took %v, want %v (claim order across keyed and unkeyed jobs)", ids, want)
	}
	finished, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "o", Items: []*driver.JobFinish{
		{ID: 2, Token: claimed[1].LeaseToken, State: "completed", Outcome: "completed"}}})
	if err != nil || len(finished) != 1 {
		t.Fatalf("finish job 2 = %v, %v", finished, err)
	}

	if _, err := m.DownTo(ctx, 10); err != nil {
		t.Fatalf("down to 10: %v", err)
	}
	checkAttempts("after down")
	if strings.Contains(tableSQL(), "WITHOUT ROWID") {
		t.Errorf("attempt table after down: %s, want a rowid table", tableSQL())
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasehold_attempt`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("attempt rows after down = %d, %v; want 3", n, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'index'
		AND name IN ('leasehold_job_running_idx', 'leasehold_job_claim_idx', 'leasehold_job_key_claim_idx',
			'leasehold_attempt_finished_idx')`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("version-10 indexes after down = %d, %v; want 4", n, err)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("up to 11 again: %v", err)
	}
	checkAttempts("after up again")
}

// BenchmarkMigration11 times migration 11 on a version-10 file holding a
// million finished jobs and a million attempt rows (the rebuild of the
// attempt table and of the claim indexes, under the write lock):
// go test -run '^$' -bench Migration11 -benchtime 1x ./sqlite
func BenchmarkMigration11(b *testing.B) {
	const rows = 1_000_000
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		d, db, err := Open(filepath.Join(b.TempDir(), "leasehold.db"))
		if err != nil {
			b.Fatal(err)
		}
		m := migrate.New(d)
		if _, err := m.UpTo(ctx, 10); err != nil {
			b.Fatalf("up to 10: %v", err)
		}
		if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
			INSERT INTO leasehold_job (kind, queue, state, args, max_attempts, scheduled_at, created_at, finalized_at, attempt, lease_token)
			SELECT 'k', 'default', 'completed', '{}', 5, i, i, i + 1000, 1, 1 FROM n`, rows); err != nil {
			b.Fatalf("insert jobs: %v", err)
		}
		if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
			INSERT INTO leasehold_attempt (job_id, attempt, token, owner, leased_at, lease_until, heartbeats, finished_at, outcome)
			SELECT i, 1, 1, 'owner', i, i + 30000000, 0, i + 1000, 'completed' FROM n`, rows); err != nil {
			b.Fatalf("insert attempts: %v", err)
		}
		b.StartTimer()
		if _, err := m.Up(ctx); err != nil {
			b.Fatalf("up to 11: %v", err)
		}
		b.StopTimer()
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM leasehold_attempt`).Scan(&n); err != nil || n != rows {
			b.Fatalf("attempt rows after up = %d, %v; want %d", n, err, rows)
		}
		db.Close()
	}
}
