package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientInsertLeased: a working client with a free worker starts a job
// it inserts itself at once (driver.LeasedInserter): Insert returns the job
// running, leased to the client, and it runs once and completes. Jobs the
// client cannot start at once go in available and reach it as before,
// through the insert's wake-up (the poll interval is a minute here): one
// inserted while the queue's one worker is busy, one into a paused queue
// (which runs only once the queue resumes), one scheduled, one inserted in
// a caller's transaction. A kind with the stuck expiry policy is never
// leased on insert: its job goes in available and the claim loop claims
// it. A backend without LeasedInserter skips.
func testClientInsertLeased[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	if _, ok := env.d.GetExecutor().(driver.LeasedInserter); !ok {
		t.Skipf("driver %s does not implement driver.LeasedInserter", env.d.Name())
	}
	ctx := context.Background()
	queue := fmt.Sprintf("leased_%d", time.Now().UnixNano())
	w := newBlockWorker(t, false)
	c := env.client(nil, leasehold.Config{PollInterval: time.Minute, Workers: workersFor(w, nil),
		Queues: map[string]leasehold.QueueConfig{queue: {MaxWorkers: 1}}})
	time.Sleep(200 * time.Millisecond) // the loop runs and its first poll found nothing
	opts := &leasehold.InsertOpts{Queue: queue}
	mustInsertResult := func(name string, opts *leasehold.InsertOpts) *leasetype.JobRow {
		t.Helper()
		res, err := c.Insert(ctx, blockArgs{Name: name}, opts)
		if err != nil {
			t.Fatalf("Insert %s: %v", name, err)
		}
		return res.Job
	}

	leased := mustInsertResult("leased", opts)
	if leased.State != leasetype.JobStateRunning || leased.LeaseOwner == "" || leased.Attempt != 1 || leased.LeaseToken != 1 || leased.LeaseUntil == nil {
		t.Fatalf("job inserted with a worker free: state %s owner %q attempt %d token %d, want running, leased, attempt 1, token 1",
			leased.State, leased.LeaseOwner, leased.Attempt, leased.LeaseToken)
	}
	if j := recvJob(t, w.started, 5*time.Second); j.ID != leased.ID || j.LeaseToken != leased.LeaseToken {
		t.Fatalf("started job %d token %d, want the leased job %d token %d", j.ID, j.LeaseToken, leased.ID, leased.LeaseToken)
	}

	// The one worker is busy: the next job goes in available.
	waiting := mustInsertResult("waiting", opts)
	if waiting.State != leasetype.JobStateAvailable || waiting.LeaseOwner != "" {
		t.Fatalf("job inserted with no worker free: state %s owner %q, want available", waiting.State, waiting.LeaseOwner)
	}
	w.releaseAll()
	for _, id := range []int64{leased.ID, waiting.ID} {
		env.waitState(id, leasetype.JobStateCompleted, 10*time.Second)
		if got := env.outcomes(id); len(got) != 1 || got[0] != leasetype.OutcomeCompleted {
			t.Fatalf("job %d outcomes = %v, want one completed", id, got)
		}
		if n := w.log.count(id); n != 1 {
			t.Fatalf("job %d ran %d times, want once", id, n)
		}
	}
	if a := env.attempts(leased.ID); len(a) != 1 || a[0].Owner != leased.LeaseOwner || a[0].Token != leased.LeaseToken {
		t.Fatalf("attempts of the leased job = %+v, want one by %s with token %d", a, leased.LeaseOwner, leased.LeaseToken)
	}

	// A paused queue: the job waits for the queue to resume.
	if err := c.QueuePause(ctx, queue); err != nil {
		t.Fatalf("QueuePause: %v", err)
	}
	paused := mustInsertResult("paused", opts)
	if paused.State != leasetype.JobStateAvailable {
		t.Fatalf("job inserted into a paused queue: state %s, want available", paused.State)
	}
	time.Sleep(300 * time.Millisecond)
	if got := env.job(paused.ID); got.State != leasetype.JobStateAvailable {
		t.Fatalf("job of a paused queue is %s, want available until the queue resumes", got.State)
	}
	if err := c.QueueResume(ctx, queue); err != nil {
		t.Fatalf("QueueResume: %v", err)
	}
	env.waitState(paused.ID, leasetype.JobStateCompleted, 10*time.Second)

	// A schedule, or a caller's transaction: inserted as before.
	scheduled := mustInsertResult("scheduled", &leasehold.InsertOpts{Queue: queue, ScheduledAt: time.Now().Add(-time.Second)})
	if scheduled.State != leasetype.JobStateAvailable {
		t.Fatalf("job inserted with a past schedule: state %s, want available", scheduled.State)
	}
	tx, err := b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
	inTx, err := c.InsertTx(ctx, tx, blockArgs{Name: "in tx"}, opts)
	if err != nil {
		t.Fatalf("InsertTx: %v", err)
	}
	if inTx.Job.State != leasetype.JobStateAvailable {
		t.Fatalf("job inserted in a caller's transaction: state %s, want available", inTx.Job.State)
	}
	if err := b.CommitTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	env.waitState(scheduled.ID, leasetype.JobStateCompleted, 10*time.Second)
	env.waitState(inTx.Job.ID, leasetype.JobStateCompleted, 10*time.Second)

	// A kind with the stuck expiry policy: inserted available, claimed by
	// the loop (woken by the insert), recorded with its policy.
	sw := newBlockWorker(t, false)
	sw.releaseAll()
	stuckQueue := queue + "_stuck"
	sc := env.client(nil, leasehold.Config{PollInterval: time.Minute,
		Workers: workersFor(sw, &leasehold.WorkerOpts{ExpiryPolicy: leasetype.ExpiryStuck}),
		Queues:  map[string]leasehold.QueueConfig{stuckQueue: {MaxWorkers: 1}}})
	time.Sleep(200 * time.Millisecond)
	res, err := sc.Insert(ctx, blockArgs{Name: "stuck kind"}, &leasehold.InsertOpts{Queue: stuckQueue})
	if err != nil {
		t.Fatalf("Insert stuck kind: %v", err)
	}
	if res.Job.State != leasetype.JobStateAvailable || res.Job.LeaseOwner != "" {
		t.Fatalf("job of a stuck-policy kind inserted with a worker free: state %s owner %q, want available",
			res.Job.State, res.Job.LeaseOwner)
	}
	if j := recvJob(t, sw.started, 5*time.Second); j.ID != res.Job.ID {
		t.Fatalf("stuck-policy client started job %d, want %d", j.ID, res.Job.ID)
	}
	if row := env.waitState(res.Job.ID, leasetype.JobStateCompleted, 10*time.Second); row.ExpiryPolicy != leasetype.ExpiryStuck {
		t.Fatalf("stuck-policy job's expiry policy = %q, want stuck", row.ExpiryPolicy)
	}
}
