package mysql

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// TestCancelRequestedExactOwner: the cancellation index holds the first 255
// characters of the owner; the lookup still matches the whole owner, byte
// for byte (utf8mb4_bin would ignore a trailing space).
func TestCancelRequestedExactOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exec := newTestDriver(t).GetExecutor()
	long := strings.Repeat("w", 300)
	owners := []string{long + "-a", long + "-b", "short", "short "}
	ids := map[string]int64{}
	for _, owner := range owners {
		if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob("cancel")}}); err != nil {
			t.Fatal(err)
		}
		jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "cancel", Max: 1, Owner: owner, DefaultLeaseTTL: time.Minute})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim as %q: %v, %v", owner, jobs, err)
		}
		if _, running, err := exec.JobCancelRunning(ctx, &driver.JobCancelRunningParams{ID: jobs[0].ID}); err != nil || !running {
			t.Fatalf("cancel job %d: running %v, %v", jobs[0].ID, running, err)
		}
		ids[owner] = jobs[0].ID
	}
	for _, owner := range owners {
		refs, err := exec.JobCancelRequested(ctx, &driver.JobCancelRequestedParams{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 1 || refs[0].ID != ids[owner] || refs[0].Token != 1 {
			t.Errorf("cancellations of %q = %+v, want job %d token 1 only", owner[max(0, len(owner)-8):], refs, ids[owner])
		}
	}
}
