package drivertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientRetention: the maintenance leader prunes completed jobs past
// their retention, keeps the states whose retention is forever, never
// touches stuck or waiting jobs, and keeps the attempt history on its own
// retention.
func testClientRetention[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := newBlockWorker(t, false)
	w.finish = func(ctx context.Context, j *leasehold.Job[blockArgs]) error {
		if j.Args.Name == "discard" {
			return leasehold.Permanent(errors.New("bad input"))
		}
		return nil
	}
	w.releaseAll()
	c := env.client(nil, leasehold.Config{
		Workers: workersFor(w, nil), LeaderTTL: time.Second,
		Retention: leasehold.Retention{Completed: 200 * time.Millisecond, Discarded: -1, Cancelled: -1, Attempts: -1, Interval: 100 * time.Millisecond},
	})
	var completed []int64
	for range 5 {
		completed = append(completed, insert(t, c, blockArgs{Name: "ok"}, nil).ID)
	}
	discarded := insert(t, c, blockArgs{Name: "discard"}, nil)
	waiting := insert(t, c, blockArgs{Name: "later"}, &leasehold.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})

	env.waitState(discarded.ID, leasetype.JobStateDiscarded, 10*time.Second)
	for _, id := range completed {
		waitFor(t, 10*time.Second, func() bool {
			_, err := env.exec.JobGet(context.Background(), &driver.JobGetParams{ID: id})
			return err != nil
		}, func() string { return "completed job not pruned" })
		if got := env.outcomes(id); len(got) != 1 || got[0] != leasetype.OutcomeCompleted {
			t.Fatalf("pruned job %d: attempt history %v, want it kept ([completed])", id, got)
		}
	}
	if got := env.job(discarded.ID); got.State != leasetype.JobStateDiscarded {
		t.Fatalf("discarded job (kept forever) is %s", got.State)
	}
	if got := env.job(waiting.ID); got.State != leasetype.JobStateScheduled {
		t.Fatalf("waiting job is %s", got.State)
	}
	// The client counts what it pruned once the delete returns, which may
	// be just after the rows are gone.
	waitFor(t, 10*time.Second, func() bool { return c.Stats().Pruned >= int64(len(completed)) },
		func() string {
			return fmt.Sprintf("Stats().Pruned = %d, want at least %d", c.Stats().Pruned, len(completed))
		})
}
