package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// outcomeArgs tells outcomeWorker what to do.
type outcomeArgs struct {
	// Do is one of fail, fail_twice, permanent, panic, snooze, cancel, ok.
	Do string `json:"do"`
}

func (outcomeArgs) Kind() string { return "drivertest_outcome" }

// otherOutcomeArgs shares outcomeArgs's kind with an incompatible field type,
// to insert arguments the worker cannot decode.
type otherOutcomeArgs struct {
	Do int `json:"do"`
}

func (otherOutcomeArgs) Kind() string { return "drivertest_outcome" }

// orphanArgs is a kind no client registers.
type orphanArgs struct{}

func (orphanArgs) Kind() string { return "drivertest_orphan" }

type outcomeWorker struct{ log *runLog }

func (w *outcomeWorker) Work(ctx context.Context, j *leasehold.Job[outcomeArgs]) error {
	w.log.add(j.JobRow)
	n := w.log.count(j.ID)
	switch j.Args.Do {
	case "fail":
		return errors.New("always fails")
	case "fail_twice":
		if n <= 2 {
			return errors.New("transient failure")
		}
		return nil
	case "permanent":
		return leasehold.Permanent(errors.New("card declined"))
	case "panic":
		panic("handler exploded")
	case "snooze":
		if n == 1 {
			return leasehold.Snooze(50 * time.Millisecond)
		}
		return nil
	case "cancel":
		return leasehold.Cancel(errors.New("order withdrawn"))
	}
	return nil
}

// testClientOutcomes: each way a handler can end leads to the right state,
// counters and attempt history.
func testClientOutcomes[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, &outcomeWorker{log: newRunLog()})
	c := env.client(nil, leasehold.Config{Workers: w})
	ins := func(do string, maxAttempts int) int64 {
		return insert(t, c, outcomeArgs{Do: do}, &leasehold.InsertOpts{MaxAttempts: maxAttempts}).ID
	}
	failTwice := ins("fail_twice", 5)
	exhausted := ins("fail", 2)
	permanent := ins("permanent", 5)
	panicked := ins("panic", 1)
	snoozed := ins("snooze", 1)
	cancelled := ins("cancel", 5)
	undecodable := insert(t, c, otherOutcomeArgs{Do: 7}, nil).ID
	orphan := insert(t, c, orphanArgs{}, nil).ID

	const wait = 10 * time.Second
	outcomes := func(o ...leasetype.AttemptOutcome) []leasetype.AttemptOutcome { return o }
	check := func(name string, id int64, state leasetype.JobState, errs int, want []leasetype.AttemptOutcome, errText string) {
		t.Helper()
		row := env.waitState(id, state, wait)
		got := env.outcomes(id)
		if !slices.Equal(got, want) || row.Errors != errs || !strings.Contains(row.LastError, errText) {
			t.Fatalf("%s: outcomes %v errors %d last error %q; want %v, %d, containing %q", name, got, row.Errors, row.LastError, want, errs, errText)
		}
	}
	check("retried then completed", failTwice, leasetype.JobStateCompleted, 2,
		outcomes(leasetype.OutcomeFailed, leasetype.OutcomeFailed, leasetype.OutcomeCompleted), "transient failure")
	check("attempts exhausted", exhausted, leasetype.JobStateDiscarded, 2,
		outcomes(leasetype.OutcomeFailed, leasetype.OutcomeFailed), "always fails")
	check("permanent error", permanent, leasetype.JobStateDiscarded, 1, outcomes(leasetype.OutcomeFailed), "card declined")
	check("panic", panicked, leasetype.JobStateDiscarded, 1, outcomes(leasetype.OutcomePanicked), "handler exploded")
	if a := env.attempts(panicked); !strings.Contains(a[0].Error, "goroutine") {
		t.Fatalf("panic attempt error has no stack: %q", a[0].Error)
	}
	check("snooze", snoozed, leasetype.JobStateCompleted, 0, outcomes(leasetype.OutcomeSnoozed, leasetype.OutcomeCompleted), "")
	check("cancel", cancelled, leasetype.JobStateCancelled, 0, outcomes(leasetype.OutcomeCancelled), "order withdrawn")
	check("undecodable args", undecodable, leasetype.JobStateDiscarded, 1, outcomes(leasetype.OutcomeFailed), "decode job args")

	// An unknown kind is recorded and retried with backoff for a later deploy.
	waitFor(t, wait, func() bool { return len(env.attempts(orphan)) >= 1 }, func() string { return "orphan job never attempted" })
	row := env.job(orphan)
	if row.State != leasetype.JobStateRetryable && row.State != leasetype.JobStateRunning && row.State != leasetype.JobStateAvailable {
		t.Fatalf("unknown kind: state %s, want it waiting for a retry", row.State)
	}
	if a := env.attempts(orphan)[0]; a.Outcome != leasetype.OutcomeFailed || !strings.Contains(a.Error, "no worker registered") {
		t.Fatalf("unknown kind attempt = %+v", a)
	}

	// The client counts an outcome once its write returns, on the
	// completer's goroutine, which may be just after the row shows it.
	statsOK := func(s leasehold.Stats) bool {
		return s.Completed >= 2 && s.Failed >= 6 && s.Discarded >= 4 && s.Cancelled == 1 && s.Snoozed == 1
	}
	waitFor(t, wait, func() bool { return statsOK(c.Stats()) }, func() string { return fmt.Sprintf("stats = %+v", c.Stats()) })
}

// testClientStop: Stop waits for running handlers and writes their outcomes;
// StopAndCancel cancels them with ErrClientStopping.
func testClientStop[TTx any](t *testing.T, b Backend[TTx]) {
	t.Run("Graceful", func(t *testing.T) {
		t.Parallel()
		env := newClientEnv(t, b)
		w := newBlockWorker(t, true)
		c := env.client(nil, leasehold.Config{Workers: workersFor(w, nil)})
		job := insert(t, c, blockArgs{Name: "graceful"}, nil)
		recvJob(t, w.started, 5*time.Second)
		stopped := make(chan error, 1)
		go func() { stopped <- c.Stop(context.Background()) }()
		select {
		case err := <-stopped:
			t.Fatalf("Stop returned %v while a handler was running", err)
		case <-time.After(200 * time.Millisecond):
		}
		w.releaseAll()
		if err := <-stopped; err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if row := env.job(job.ID); row.State != leasetype.JobStateCompleted {
			t.Fatalf("after Stop the job is %s, want completed", row.State)
		}
		later := insert(t, c, blockArgs{Name: "after stop"}, nil)
		time.Sleep(200 * time.Millisecond)
		if row := env.job(later.ID); row.State != leasetype.JobStateAvailable {
			t.Fatalf("a stopped client claimed a job: %s", row.State)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		t.Parallel()
		env := newClientEnv(t, b)
		w := newBlockWorker(t, false)
		c := env.client(nil, leasehold.Config{Workers: workersFor(w, nil)})
		job := insert(t, c, blockArgs{Name: "cancel"}, nil)
		recvJob(t, w.started, 5*time.Second)
		if err := c.StopAndCancel(context.Background()); err != nil {
			t.Fatalf("StopAndCancel: %v", err)
		}
		if cause := <-w.ctxCause; !errors.Is(cause, leasehold.ErrClientStopping) {
			t.Fatalf("handler cause = %v, want ErrClientStopping", cause)
		}
		row := env.job(job.ID)
		if row.State != leasetype.JobStateRetryable || row.Errors != 1 {
			t.Fatalf("interrupted job: state %s errors %d; want retryable, 1", row.State, row.Errors)
		}
		if err := c.Stop(context.Background()); !errors.Is(err, leasehold.ErrNotStarted) {
			t.Fatalf("second Stop = %v, want ErrNotStarted", err)
		}
	})
}
