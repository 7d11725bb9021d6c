package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// subscribeArgs tells the Subscribe test's worker what to do.
type subscribeArgs struct {
	// Do is ok, fail or tx (complete with CompleteTx, then commit).
	Do string `json:"do"`
}

func (subscribeArgs) Kind() string { return "drivertest_subscribe" }

// eventLog collects a subscription's events, and what the database held
// for the event's job when it arrived.
type eventLog struct {
	mu     sync.Mutex
	events []*leasehold.Event
	stored map[*leasehold.Event]*leasetype.JobRow
}

// collect receives from ch until it closes, reading each event's job back
// with exec.
func collect(exec driver.Executor, ch <-chan *leasehold.Event) *eventLog {
	l := &eventLog{stored: map[*leasehold.Event]*leasetype.JobRow{}}
	go func() {
		for e := range ch {
			row, _ := exec.JobGet(context.Background(), &driver.JobGetParams{ID: e.Job.ID})
			l.mu.Lock()
			l.events = append(l.events, e)
			l.stored[e] = row
			l.mu.Unlock()
		}
	}()
	return l
}

// of returns the events of job id, in arrival order.
func (l *eventLog) of(id int64) []*leasehold.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*leasehold.Event
	for _, e := range l.events {
		if e.Job.ID == id {
			out = append(out, e)
		}
	}
	return out
}

func (l *eventLog) storedAt(e *leasehold.Event) *leasetype.JobRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stored[e]
}

// wait waits until job id has n events and returns them.
func (l *eventLog) wait(t *testing.T, id int64, n int, timeout time.Duration) []*leasehold.Event {
	t.Helper()
	waitFor(t, timeout, func() bool { return len(l.of(id)) >= n },
		func() string { return fmt.Sprintf("job %d events %v, want %d", id, eventKinds(l.of(id)), n) })
	return l.of(id)
}

func eventKinds(events []*leasehold.Event) []leasehold.EventKind {
	var out []leasehold.EventKind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

// testClientSubscribe: a subscription receives this client's events, each
// once what it reports is durable: completions (also by CompleteTx),
// failures then the discard at max attempts, expiries the watcher
// reclaimed, and leases lost.
func testClientSubscribe[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	if err := env.exec.Exec(ctx, "CREATE TABLE drivertest_sub_ledger (job_id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[subscribeArgs](func(ctx context.Context, j *leasehold.Job[subscribeArgs]) error {
		switch j.Args.Do {
		case "fail":
			return errors.New("always fails")
		case "tx":
			client, err := leasehold.ClientFromContext[TTx](ctx)
			if err != nil {
				return err
			}
			tx, err := b.BeginTx(ctx, env.d)
			if err != nil {
				return err
			}
			defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
			if err := env.d.UnwrapExecutor(tx).Exec(ctx, "INSERT INTO drivertest_sub_ledger (job_id) VALUES ("+itoa(j.ID)+")"); err != nil {
				return err
			}
			if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
				return err
			}
			return b.CommitTx(ctx, tx)
		}
		return nil
	}))
	c := env.client(nil, leasehold.Config{Workers: w})
	ch, cancel, err := c.Subscribe(leasehold.EventKindJobCompleted, leasehold.EventKindJobFailed, leasehold.EventKindJobDiscarded,
		leasehold.EventKindJobExpired, leasehold.EventKindLeaseLost)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	log := collect(env.exec, ch)

	ok := insert(t, c, subscribeArgs{Do: "ok"}, nil)
	failing := insert(t, c, subscribeArgs{Do: "fail"}, &leasehold.InsertOpts{MaxAttempts: 2})
	viaTx := insert(t, c, subscribeArgs{Do: "tx"}, nil)
	// A job in a queue no client works, claimed by a worker that vanishes:
	// the client's watcher reclaims it.
	orphan := insert(t, c, subscribeArgs{Do: "ok"}, &leasehold.InsertOpts{Queue: "subscribe_orphans", LeaseTTL: 200 * time.Millisecond})
	if rows, err := env.exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "subscribe_orphans", Max: 1, Owner: "gone", DefaultLeaseTTL: time.Minute}); err != nil || len(rows) != 1 {
		t.Fatalf("claim the orphan: %d rows, %v", len(rows), err)
	}

	t.Run("Completed", func(t *testing.T) {
		e := log.wait(t, ok.ID, 1, 10*time.Second)[0]
		if e.Kind != leasehold.EventKindJobCompleted || e.Job.State != leasetype.JobStateCompleted || e.Job.Attempt != 1 || e.Err != nil {
			t.Fatalf("event %s job state %s attempt %d err %v; want job_completed, completed, attempt 1, no error", e.Kind, e.Job.State, e.Job.Attempt, e.Err)
		}
		if row := log.storedAt(e); row == nil || row.State != leasetype.JobStateCompleted {
			t.Fatalf("stored job when the event arrived: %+v, want completed", row)
		}
	})
	t.Run("FailedThenDiscarded", func(t *testing.T) {
		events := log.wait(t, failing.ID, 2, 10*time.Second)
		if got := eventKinds(events); !slices.Equal(got, []leasehold.EventKind{leasehold.EventKindJobFailed, leasehold.EventKindJobDiscarded}) {
			t.Fatalf("events %v, want [job_failed job_discarded]", got)
		}
		failed, discarded := events[0].Job, events[1].Job
		if failed.State != leasetype.JobStateRetryable || failed.Attempt != 1 || failed.Errors != 1 || failed.LastError != "always fails" {
			t.Fatalf("failed event job %+v; want retryable, attempt 1, errors 1, last error 'always fails'", failed)
		}
		if discarded.State != leasetype.JobStateDiscarded || discarded.Attempt != 2 || discarded.Errors != 2 || discarded.LastError != "always fails" {
			t.Fatalf("discarded event job %+v; want discarded, attempt 2, errors 2", discarded)
		}
		if row := log.storedAt(events[1]); row == nil || row.State != leasetype.JobStateDiscarded {
			t.Fatalf("stored job when the discard event arrived: %+v, want discarded", row)
		}
	})
	t.Run("CompleteTx", func(t *testing.T) {
		e := log.wait(t, viaTx.ID, 1, 10*time.Second)[0]
		if e.Kind != leasehold.EventKindJobCompleted || e.Job.State != leasetype.JobStateCompleted {
			t.Fatalf("event %s job state %s, want job_completed, completed", e.Kind, e.Job.State)
		}
		// The completion was written in the handler's transaction: stored
		// with the attempt's token, it committed.
		if row := log.storedAt(e); row == nil || row.State != leasetype.JobStateCompleted || row.LeaseToken != e.Job.LeaseToken {
			t.Fatalf("stored job when the event arrived: %+v, want completed by token %d", row, e.Job.LeaseToken)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		e := log.wait(t, orphan.ID, 1, 10*time.Second)[0]
		if e.Kind != leasehold.EventKindJobExpired || e.Job.State != leasetype.JobStateAvailable || e.Job.Expiries != 1 || e.Job.LeaseOwner != "gone" {
			t.Fatalf("event %s job %+v; want job_expired of the orphan, available, expiries 1, owner gone", e.Kind, e.Job)
		}
	})
	t.Run("LeaseLost", func(t *testing.T) {
		// A client whose database goes silent loses its lease at the local
		// deadline.
		ttl := 600 * time.Millisecond
		fd := newFaultDriver(env.d)
		blocked := newBlockWorker(t, false)
		lossy := env.client(fd, leasehold.Config{ID: "lossy", LeaseTTL: ttl, Workers: workersFor(blocked, nil),
			Queues: map[string]leasehold.QueueConfig{"subscribe_lossy": {MaxWorkers: 1}}})
		lost, stop, err := lossy.Subscribe(leasehold.EventKindLeaseLost, leasehold.EventKindJobCompleted)
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		job := insert(t, lossy, blockArgs{Name: "lossy"}, &leasehold.InsertOpts{Queue: "subscribe_lossy"})
		recvJob(t, blocked.started, 5*time.Second)
		fd.set(faultBlackhole)
		select {
		case e := <-lost:
			var lle *leasehold.LeaseLostError
			if e.Kind != leasehold.EventKindLeaseLost || e.Job.ID != job.ID || !errors.As(e.Err, &lle) || lle.JobID != job.ID || lle.Token != 1 {
				t.Fatalf("event %s job %d err %v; want lease_lost of job %d with a *LeaseLostError for token 1", e.Kind, e.Job.ID, e.Err, job.ID)
			}
		case <-time.After(3 * ttl):
			t.Fatalf("no lease_lost event within 3×TTL of the database going silent")
		}
		fd.set(faultNone)
		if s := lossy.Stats(); s.LeasesLost != 1 {
			t.Fatalf("LeasesLost = %d, want 1", s.LeasesLost)
		}
	})
	if s := c.Stats(); s.EventsDropped != 0 {
		t.Fatalf("EventsDropped = %d, want 0", s.EventsDropped)
	}
}
