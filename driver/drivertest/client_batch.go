package drivertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// memberArgs is a batch member: it completes, fails permanently or
// cancels itself, as Outcome says.
type memberArgs struct {
	N       int    `json:"n"`
	Outcome string `json:"outcome"`
}

func (memberArgs) Kind() string { return "drivertest_batch_member" }

// callbackArgs is a batch callback; the client fills Batch.
type callbackArgs struct {
	Name  string                 `json:"name"`
	Batch leasehold.BatchOutcome `json:"batch"`
}

func (callbackArgs) Kind() string { return "drivertest_batch_callback" }

// testClientBatch: a batch's members run on two clients and all finish at
// the same moment (they wait for each other); the callback runs once,
// after every member finished, with the members' outcome counts in its
// args.
func testClientBatch[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	const members = 24
	var (
		started   atomic.Int32
		allIn     = make(chan struct{})
		closeOnce sync.Once
		callbacks = make(chan callbackArgs, 4)
		finished  atomic.Int32
	)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[memberArgs](func(ctx context.Context, j *leasehold.Job[memberArgs]) error {
		if started.Add(1) == members {
			closeOnce.Do(func() { close(allIn) })
		}
		select {
		case <-allIn:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer finished.Add(1)
		switch j.Args.Outcome {
		case "fail":
			return leasehold.Permanent(errors.New("member fails"))
		case "cancel":
			return leasehold.Cancel(errors.New("member cancels"))
		}
		return nil
	}))
	leasehold.AddWorker(workers, leasehold.WorkFunc[callbackArgs](func(ctx context.Context, j *leasehold.Job[callbackArgs]) error {
		if n := finished.Load(); n != members {
			t.Errorf("callback ran when %d of %d members had finished", n, members)
		}
		callbacks <- j.Args
		return nil
	}))
	queues := map[string]leasehold.QueueConfig{"default": {MaxWorkers: members}}
	inserter := env.client(nil, leasehold.Config{})
	params := make([]leasehold.InsertManyParams, members)
	want := leasehold.BatchOutcome{Members: members}
	for i := range params {
		outcome := "complete"
		switch i % 4 {
		case 1:
			outcome, want.Discarded = "fail", want.Discarded+1
		case 2:
			outcome, want.Cancelled = "cancel", want.Cancelled+1
		default:
			want.Completed++
		}
		params[i] = leasehold.InsertManyParams{Args: memberArgs{N: i, Outcome: outcome}, InsertOpts: &leasehold.InsertOpts{MaxAttempts: 1}}
	}
	res, err := inserter.InsertBatch(context.Background(), params, leasehold.InsertManyParams{Args: callbackArgs{Name: "settle"}})
	if err != nil {
		t.Fatalf("InsertBatch: %v", err)
	}
	if res.Callback.Job.State != leasetype.JobStatePending || len(res.Members) != members {
		t.Fatalf("callback inserted %s with %d members, want pending with %d", res.Callback.Job.State, len(res.Members), members)
	}
	env.client(nil, leasehold.Config{ID: "batch-a", Queues: queues, Workers: workers})
	env.client(nil, leasehold.Config{ID: "batch-b", Queues: queues, Workers: workers})

	row := env.waitState(res.Callback.Job.ID, leasetype.JobStateCompleted, 30*time.Second)
	var got callbackArgs
	select {
	case got = <-callbacks:
	case <-time.After(5 * time.Second):
		t.Fatal("callback did not report")
	}
	if got.Name != "settle" || got.Batch != want {
		t.Fatalf("callback args = %+v, want name settle and %+v", got, want)
	}
	// Exactly once: no second run was recorded, nor will be.
	time.Sleep(200 * time.Millisecond)
	if len(callbacks) != 0 || row.Attempt != 1 {
		t.Fatalf("callback ran more than once (attempt %d, %d more reports)", row.Attempt, len(callbacks))
	}
	owners := map[string]bool{}
	for _, m := range res.Members {
		owners[env.job(m.Job.ID).LeaseOwner] = true
	}
	if len(owners) < 2 {
		t.Logf("all members ran on one client (%v); the concurrent finish was not across clients this run", owners)
	}
}
