package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseStats specifies the read models of dashboards and metrics:
// throughput per minute and the claimable backlog per queue.
func exerciseStats[TTx any](t *testing.T, b Backend[TTx]) {
	t.Run("ThroughputAndBacklog", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		ctx := context.Background()
		now, err := exec.Now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		future := now.Add(time.Hour)
		var params []*driver.JobInsertParams
		for _, q := range []string{"alpha", "alpha", "alpha", "beta", "beta"} {
			params = append(params, &driver.JobInsertParams{Kind: "k", Queue: q, Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 3})
		}
		params = append(params, &driver.JobInsertParams{Kind: "k", Queue: "gamma", Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 3, ScheduledAt: &future})
		if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: params}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // so the oldest job has a measurable age
		backlog, err := exec.QueueBacklog(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(backlog) != 2 || backlog[0].Queue != "alpha" || backlog[0].Available != 3 || backlog[1].Queue != "beta" || backlog[1].Available != 2 {
			t.Fatalf("backlog = %s, want alpha 3, beta 2 (gamma's job is not due)", dumpBacklog(backlog))
		}
		if backlog[0].OldestAge < 10*time.Millisecond || backlog[0].OldestAge > time.Minute {
			t.Fatalf("alpha's oldest age = %s, want about the time since insert", backlog[0].OldestAge)
		}

		// Claim alpha's jobs: complete two, fail one.
		claimed, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "alpha", Max: 3, Owner: "w", DefaultLeaseTTL: time.Minute})
		if err != nil || len(claimed) != 3 {
			t.Fatalf("claim: %d jobs, %v", len(claimed), err)
		}
		items := []*driver.JobFinish{
			{ID: claimed[0].ID, Token: claimed[0].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted},
			{ID: claimed[1].ID, Token: claimed[1].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted},
			{ID: claimed[2].ID, Token: claimed[2].LeaseToken, State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: "x", CountError: true},
		}
		if written, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: items}); err != nil || len(written) != 3 {
			t.Fatalf("finish: %v, %v", written, err)
		}
		backlog, err = exec.QueueBacklog(ctx)
		if err != nil || len(backlog) != 1 || backlog[0].Queue != "beta" {
			t.Fatalf("backlog after claiming alpha = %s, %v; want beta only", dumpBacklog(backlog), err)
		}

		counts, err := exec.JobThroughput(ctx, &driver.JobThroughputParams{Since: now.Add(-time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		got := map[leasetype.AttemptOutcome]int64{}
		for _, c := range counts {
			if c.Queue != "alpha" || !c.Minute.Equal(c.Minute.Truncate(time.Minute)) || c.Minute.After(now.Add(time.Minute)) {
				t.Fatalf("throughput row %+v: want queue alpha, a whole minute near now", *c)
			}
			got[c.Outcome] += c.Count
		}
		if got[leasetype.OutcomeCompleted] != 2 || got[leasetype.OutcomeFailed] != 1 || len(got) != 2 {
			t.Fatalf("throughput = %v, want 2 completed, 1 failed", got)
		}
		counts, err = exec.JobThroughput(ctx, &driver.JobThroughputParams{Since: now.Add(time.Hour)})
		if err != nil || len(counts) != 0 {
			t.Fatalf("throughput since a future time = %d rows, %v; want none", len(counts), err)
		}
	})
}

func dumpBacklog(b []*leasetype.QueueBacklog) string {
	s := "["
	for _, q := range b {
		s += q.Queue + ":" + itoa(q.Available) + " "
	}
	return s + "]"
}
