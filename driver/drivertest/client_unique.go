package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientUniqueOpts: uniqueness by args, by period, and in finished
// states, through the client.
func testClientUniqueOpts[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	c := env.client(nil, leasehold.Config{})
	ins := func(args leasehold.JobArgs, opts *leasehold.InsertOpts) *leasehold.InsertResult {
		t.Helper()
		res, err := c.Insert(ctx, args, opts)
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		return res
	}
	later := time.Now().Add(time.Hour)

	byArgs := &leasehold.InsertOpts{ScheduledAt: later, UniqueOpts: leasehold.UniqueOpts{ByArgs: true}}
	first := ins(testArgs{Name: "a"}, byArgs)
	if first.UniqueSkipped {
		t.Fatal("first insert by args skipped")
	}
	if again := ins(testArgs{Name: "a"}, byArgs); !again.UniqueSkipped || again.Job.ID != first.Job.ID {
		t.Fatalf("same args: skipped=%v id=%d, want the existing job %d", again.UniqueSkipped, again.Job.ID, first.Job.ID)
	}
	if other := ins(testArgs{Name: "b"}, byArgs); other.UniqueSkipped {
		t.Fatal("different args were skipped")
	}

	// By period: the same hour holds one job, the next hour another.
	hour := time.Now().UTC().Truncate(time.Hour).Add(2 * time.Hour)
	byPeriod := func(at time.Time) *leasehold.InsertOpts {
		return &leasehold.InsertOpts{ScheduledAt: at, UniqueOpts: leasehold.UniqueOpts{ByPeriod: time.Hour}}
	}
	p1 := ins(testArgs{Name: "p1"}, byPeriod(hour.Add(5*time.Minute)))
	if p2 := ins(testArgs{Name: "p2"}, byPeriod(hour.Add(50*time.Minute))); !p2.UniqueSkipped || p2.Job.ID != p1.Job.ID {
		t.Fatalf("same period: skipped=%v, want the existing job", p2.UniqueSkipped)
	}
	if p3 := ins(testArgs{Name: "p3"}, byPeriod(hour.Add(65*time.Minute))); p3.UniqueSkipped {
		t.Fatal("next period was skipped")
	}

	// By state: a key held in completed stays held once the job is done.
	w := newBlockWorker(t, false)
	w.releaseAll()
	worker := env.client(nil, leasehold.Config{Workers: workersFor(w, nil)})
	once := &leasehold.InsertOpts{UniqueKey: "settle-42", UniqueOpts: leasehold.UniqueOpts{ByState: []leasetype.JobState{leasetype.JobStateCompleted}}}
	res, err := worker.Insert(ctx, blockArgs{Name: "once"}, once)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	env.waitState(res.Job.ID, leasetype.JobStateCompleted, 10*time.Second)
	again, err := worker.Insert(ctx, blockArgs{Name: "once"}, once)
	if err != nil {
		t.Fatalf("Insert again: %v", err)
	}
	if !again.UniqueSkipped || again.Job.ID != res.Job.ID {
		t.Fatalf("insert after completion: skipped=%v id=%d, want the completed job %d", again.UniqueSkipped, again.Job.ID, res.Job.ID)
	}
	// Without ByState, the key is free again after completion.
	plain := &leasehold.InsertOpts{UniqueKey: "settle-43"}
	res, err = worker.Insert(ctx, blockArgs{Name: "plain"}, plain)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	env.waitState(res.Job.ID, leasetype.JobStateCompleted, 10*time.Second)
	if again, err := worker.Insert(ctx, blockArgs{Name: "plain"}, plain); err != nil || again.UniqueSkipped {
		t.Fatalf("insert after completion without ByState: %v, skipped=%v; want a new job", err, again != nil && again.UniqueSkipped)
	}

	// Retrying a cancelled job whose key a newer job has taken is refused
	// with ErrUniqueConflict; the cancelled job stays cancelled.
	key := &leasehold.InsertOpts{UniqueKey: "refund-9", ScheduledAt: later}
	cancelled, err := c.Insert(ctx, testArgs{Name: "refund"}, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobCancel(ctx, cancelled.Job.ID); err != nil {
		t.Fatal(err)
	}
	if newer, err := c.Insert(ctx, testArgs{Name: "refund"}, key); err != nil || newer.UniqueSkipped {
		t.Fatalf("insert with the released key: %v, skipped=%v; want a new job", err, newer != nil && newer.UniqueSkipped)
	}
	if _, err := c.JobRetry(ctx, cancelled.Job.ID); !errors.Is(err, leasehold.ErrUniqueConflict) {
		t.Fatalf("JobRetry of the cancelled job = %v, want ErrUniqueConflict", err)
	}
	if row := env.job(cancelled.Job.ID); row.State != leasetype.JobStateCancelled {
		t.Fatalf("cancelled job is %s after the refused retry", row.State)
	}

	// Unfinished states always hold the key: naming one is a mistake.
	bad := &leasehold.InsertOpts{UniqueKey: "k", UniqueOpts: leasehold.UniqueOpts{ByState: []leasetype.JobState{leasetype.JobStateRunning}}}
	if _, err := c.Insert(ctx, testArgs{Name: "bad"}, bad); !errors.Is(err, leasehold.ErrInvalidArgs) {
		t.Fatalf("ByState [running] = %v, want ErrInvalidArgs", err)
	}
}
