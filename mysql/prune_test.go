package mysql

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestPruneMoreThanOneDelete: a prune larger than one DELETE's batch deletes
// exactly its limit, oldest first.
func TestPruneMoreThanOneDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	const n = pruneDeleteBatch*2 + 10
	params := make([]*driver.JobInsertParams, n)
	for i := range params {
		params[i] = testJob("prune")
	}
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: params}); err != nil {
		t.Fatal(err)
	}
	// Finalized one second apart, by ID, an hour and more ago.
	if _, err := d.DB().ExecContext(ctx, `UPDATE leasehold_job
		SET state = 'completed', finalized_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR - INTERVAL (100000 - id) SECOND`); err != nil {
		t.Fatal(err)
	}
	completed := []leasetype.JobState{leasetype.JobStateCompleted}
	if got, err := exec.JobPrune(ctx, &driver.JobPruneParams{States: completed}); err != nil || got != 0 {
		t.Fatalf("JobPrune without a limit = %d, %v; want 0 (a limit below one deletes nothing)", got, err)
	}
	limit := pruneDeleteBatch*2 + 5
	got, err := exec.JobPrune(ctx, &driver.JobPruneParams{States: completed, OlderThan: time.Minute, Limit: limit})
	if err != nil || got != int64(limit) {
		t.Fatalf("JobPrune = %d, %v; want %d", got, err, limit)
	}
	left, err := exec.JobList(ctx, &driver.JobListParams{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != n-limit {
		t.Fatalf("%d jobs left, want %d", len(left), n-limit)
	}
	var maxID int64
	if err := d.DB().QueryRowContext(ctx, "SELECT MAX(id) FROM leasehold_job").Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	for _, j := range left {
		if j.ID <= maxID-int64(n-limit) {
			t.Errorf("job %d survived, but older jobs were pruned before newer ones", j.ID)
		}
	}
}
