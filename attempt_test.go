package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

func TestOutcome(t *testing.T) {
	t.Parallel()
	core := &clientCore{cfg: &Config{Retry: ExponentialBackoff{Base: time.Minute, Jitter: -1}}}
	mkLease := func(errs, maxAttempts int) *lease {
		return &lease{row: &leasetype.JobRow{Errors: errs, MaxAttempts: maxAttempts}}
	}
	tests := func() []struct {
		name        string
		lease       *lease
		err         error
		state       leasetype.JobState
		outcome     leasetype.AttemptOutcome
		countError  bool
		scheduledIn time.Duration // 0: not scheduled
	} {
		return []struct {
			name        string
			lease       *lease
			err         error
			state       leasetype.JobState
			outcome     leasetype.AttemptOutcome
			countError  bool
			scheduledIn time.Duration
		}{
			{"success", mkLease(0, 3), nil, leasetype.JobStateCompleted, leasetype.OutcomeCompleted, false, 0},
			{"error with attempts left", mkLease(0, 3), errors.New("x"), leasetype.JobStateRetryable, leasetype.OutcomeFailed, true, time.Minute},
			{"second error backs off longer", mkLease(1, 3), errors.New("x"), leasetype.JobStateRetryable, leasetype.OutcomeFailed, true, 2 * time.Minute},
			{"last attempt", mkLease(2, 3), errors.New("x"), leasetype.JobStateDiscarded, leasetype.OutcomeFailed, true, 0},
			{"permanent", mkLease(0, 3), Permanent(errors.New("declined")), leasetype.JobStateDiscarded, leasetype.OutcomeFailed, true, 0},
			{"wrapped permanent", mkLease(0, 3), errors.Join(errors.New("ctx"), Permanent(nil)), leasetype.JobStateDiscarded, leasetype.OutcomeFailed, true, 0},
			{"cancel", mkLease(0, 3), Cancel(nil), leasetype.JobStateCancelled, leasetype.OutcomeCancelled, false, 0},
			{"snooze", mkLease(2, 3), Snooze(time.Hour), leasetype.JobStateScheduled, leasetype.OutcomeSnoozed, false, time.Hour},
			{"panic", mkLease(0, 3), &panicError{value: "boom"}, leasetype.JobStateRetryable, leasetype.OutcomePanicked, true, time.Minute},
			{"undecodable", mkLease(0, 3), &errDecode{err: errors.New("bad json")}, leasetype.JobStateDiscarded, leasetype.OutcomeFailed, true, 0},
		}
	}
	for _, tc := range tests() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := core.outcome(tc.lease, tc.err)
			if got.State != tc.state || got.Outcome != tc.outcome || got.CountError != tc.countError {
				t.Fatalf("outcome = %s/%s count=%v, want %s/%s count=%v", got.State, got.Outcome, got.CountError, tc.state, tc.outcome, tc.countError)
			}
			if tc.scheduledIn == 0 {
				if got.ScheduledAt != nil {
					t.Fatalf("scheduled at %s, want not scheduled", got.ScheduledAt)
				}
				return
			}
			if got.ScheduledAt == nil {
				t.Fatalf("not scheduled, want in %s", tc.scheduledIn)
			}
			if in := time.Until(*got.ScheduledAt); in < tc.scheduledIn-time.Second || in > tc.scheduledIn {
				t.Fatalf("scheduled in %s, want %s", in, tc.scheduledIn)
			}
		})
	}
}

// TestReleaseWhenStoppingBeforeStart: a job claimed while the client is
// stopping is released, not run and not failed.
func TestReleaseWhenStoppingBeforeStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestSQLite(t)
	ran := false
	w := NewWorkers()
	AddWorker(w, WorkFunc[noopArgs](func(context.Context, *Job[noopArgs]) error { ran = true; return nil }))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Insert(ctx, noopArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	serviceCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go c.core.completer.run(serviceCtx)
	c.core.handlerBase = serviceCtx
	c.core.stopping.Store(true)
	p := newProducer(defaultQueue, 1, nil)
	defer p.handlers.close() // claimAndStart bypasses p.run, which would close the pool
	if err := c.core.claimAndStart(ctx, p, 1); err != nil {
		t.Fatal(err)
	}
	c.core.leases.wg.Wait()

	row, err := c.JobGet(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := c.JobAttempts(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ran || row.State != leasetype.JobStateAvailable || row.Errors != 0 || len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeReleased {
		t.Fatalf("ran=%v state=%s errors=%d attempts=%+v; want not run, available, 0 errors, one released attempt", ran, row.State, row.Errors, attempts)
	}
	if s := c.Stats(); s.Released != 1 || s.Failed != 0 {
		t.Fatalf("stats = %+v", s)
	}
}

// A handler that starts after StopAndCancel looked at the running leases
// (its cancel function was not set yet) still gets a cancelled context.
func TestInterruptReachesHandlerStartingLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestSQLite(t)
	var cause error
	w := NewWorkers()
	AddWorker(w, WorkFunc[noopArgs](func(ctx context.Context, _ *Job[noopArgs]) error {
		cause = context.Cause(ctx)
		return nil
	}))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, noopArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	serviceCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go c.core.completer.run(serviceCtx)
	c.core.handlerBase = serviceCtx
	c.core.interruptHandlers() // finds no lease yet
	p := newProducer(defaultQueue, 1, nil)
	defer p.handlers.close() // claimAndStart bypasses p.run, which would close the pool
	if err := c.core.claimAndStart(ctx, p, 1); err != nil {
		t.Fatal(err)
	}
	c.core.leases.wg.Wait()
	if !errors.Is(cause, ErrClientStopping) {
		t.Fatalf("handler context cause = %v, want ErrClientStopping", cause)
	}
}
