package leaseholdtest_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/leasetype"
)

// taskArgs is the job of the Worker tests: Do says what the handler does.
type taskArgs struct {
	Do string `json:"do"`
}

func (taskArgs) Kind() string { return "task" }

var errTask = errors.New("task failed")

// noDelay retries at once, so that a retried job is claimable again right
// after its failure: the Worker must still run it only once.
type noDelay struct{}

func (noDelay) NextRetry(int) time.Duration { return 0 }

// taskWorker runs taskArgs and counts its calls.
type taskWorker[TTx any] struct {
	d     driver.Driver[TTx]
	b     backend[TTx]
	calls atomic.Int32
}

func (w *taskWorker[TTx]) Work(ctx context.Context, j *leasehold.Job[taskArgs]) error {
	w.calls.Add(1)
	switch j.Args.Do {
	case "fail":
		return errTask
	case "permanent":
		return leasehold.Permanent(errTask)
	case "snooze":
		return leasehold.Snooze(0)
	case "cancel":
		return leasehold.Cancel(errTask)
	case "panic":
		panic("boom")
	case "wait":
		<-ctx.Done()
		return context.Cause(ctx)
	case "complete_tx":
		client, err := leasehold.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		tx, err := w.b.begin(ctx, w.d)
		if err != nil {
			return err
		}
		defer w.b.rollback(ctx, tx) //nolint:errcheck // no-op after commit
		if err := w.d.UnwrapExecutor(tx).Exec(ctx, "INSERT INTO ledger (job_id) VALUES ("+strconv.FormatInt(j.ID, 10)+")"); err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
			return err
		}
		return w.b.commit(ctx, tx)
	}
	return nil
}

func testConfig() *leasehold.Config {
	return &leasehold.Config{Retry: noDelay{}, Logger: quietLogger()}
}

func outcomes(res *leaseholdtest.WorkResult) []leasetype.AttemptOutcome {
	var out []leasetype.AttemptOutcome
	for _, a := range res.Attempts {
		out = append(out, a.Outcome)
	}
	return out
}

func TestWorkerOutcomes(t *testing.T) {
	onBoth(t, testWorkerOutcomes[*sql.Tx], testWorkerOutcomes[pgx.Tx])
}

// testWorkerOutcomes: Work runs the handler once through a real client and
// reports the state, attempt and error the client recorded.
func testWorkerOutcomes[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	for _, tc := range []struct {
		do      string
		state   leasetype.JobState
		outcome leasetype.AttemptOutcome
		err     bool
	}{
		{"ok", leasetype.JobStateCompleted, leasetype.OutcomeCompleted, false},
		{"fail", leasetype.JobStateRetryable, leasetype.OutcomeFailed, true},
		{"permanent", leasetype.JobStateDiscarded, leasetype.OutcomeFailed, true},
		{"snooze", leasetype.JobStateScheduled, leasetype.OutcomeSnoozed, true},
		{"cancel", leasetype.JobStateCancelled, leasetype.OutcomeCancelled, true},
	} {
		t.Run(tc.do, func(t *testing.T) {
			w := &taskWorker[TTx]{}
			tw := leaseholdtest.NewWorker(t, d, testConfig(), w, nil)
			res := tw.Work(ctx, t, taskArgs{Do: tc.do}, &leasehold.InsertOpts{Priority: 3, Metadata: map[string]any{"case": tc.do}})
			if res.Job.State != tc.state || res.Outcome() != tc.outcome {
				t.Fatalf("job state %s, outcome %s; want %s, %s", res.Job.State, res.Outcome(), tc.state, tc.outcome)
			}
			if len(res.Attempts) != 1 || res.Attempts[0].JobID != res.Job.ID || res.Attempts[0].Token != res.Job.LeaseToken {
				t.Fatalf("attempts = %+v, want one, for the job's lease", res.Attempts)
			}
			if (res.Err != nil) != tc.err || tc.err && tc.do != "snooze" && !errors.Is(res.Err, errTask) {
				t.Fatalf("handler error = %v", res.Err)
			}
			if res.Panic != nil || res.Job.Priority != 3 {
				t.Fatalf("panic %v, priority %d", res.Panic, res.Job.Priority)
			}
			// Retried and snoozed jobs were due again at once: the Worker
			// still ran the handler once.
			if n := w.calls.Load(); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
		})
	}

	t.Run("panic", func(t *testing.T) {
		tw := leaseholdtest.NewWorker(t, d, testConfig(), &taskWorker[TTx]{}, nil)
		res := tw.Work(ctx, t, taskArgs{Do: "panic"}, nil)
		if res.Panic != "boom" || res.Err != nil || res.Outcome() != leasetype.OutcomePanicked || res.Job.State != leasetype.JobStateRetryable {
			t.Fatalf("panic %v, err %v, outcome %s, state %s", res.Panic, res.Err, res.Outcome(), res.Job.State)
		}
		if !strings.Contains(res.Job.LastError, "boom") {
			t.Fatalf("last error %q does not name the panic", res.Job.LastError)
		}
	})
}

func TestWorkerRetryWithWorkJob(t *testing.T) {
	onBoth(t, testWorkerRetryWithWorkJob[*sql.Tx], testWorkerRetryWithWorkJob[pgx.Tx])
}

// testWorkerRetryWithWorkJob: WorkJob runs the next attempt of a retried
// job, and a job inserted by the application, in its own queue.
func testWorkerRetryWithWorkJob[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	w := &taskWorker[TTx]{}
	tw := leaseholdtest.NewWorker(t, d, testConfig(), w, &leasehold.WorkerOpts{MaxAttempts: 2})
	first := tw.Work(ctx, t, taskArgs{Do: "fail"}, nil)
	if first.Job.State != leasetype.JobStateRetryable || first.Job.MaxAttempts != 2 {
		t.Fatalf("after a failure: state %s, max attempts %d; want retryable, 2 (the worker's option)", first.Job.State, first.Job.MaxAttempts)
	}
	second := tw.WorkJob(ctx, t, first.Job)
	if second.Job.State != leasetype.JobStateDiscarded || second.Job.Errors != 2 {
		t.Fatalf("after the second failure: state %s, errors %d; want discarded, 2", second.Job.State, second.Job.Errors)
	}
	if got := outcomes(second); !slices.Equal(got, []leasetype.AttemptOutcome{leasetype.OutcomeFailed, leasetype.OutcomeFailed}) {
		t.Fatalf("outcomes = %v", got)
	}

	// A job the application inserted, in the default queue.
	app := newInserter(t, d)
	job := insert(t, app, taskArgs{Do: "ok"}, nil).Job
	res := tw.WorkJob(ctx, t, job)
	if res.Job.ID != job.ID || res.Job.State != leasetype.JobStateCompleted || res.Job.Queue != "default" {
		t.Fatalf("WorkJob: job %d state %s queue %q", res.Job.ID, res.Job.State, res.Job.Queue)
	}
	if n := w.calls.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
}

func TestWorkerCompleteTx(t *testing.T) {
	onBoth(t, testWorkerCompleteTx[*sql.Tx], testWorkerCompleteTx[pgx.Tx])
}

// testWorkerCompleteTx: the handler runs inside a real client, so
// ClientFromContext and CompleteTx work in it.
func testWorkerCompleteTx[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	if err := d.GetExecutor().Exec(ctx, "CREATE TABLE ledger (job_id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tw := leaseholdtest.NewWorker(t, d, testConfig(), &taskWorker[TTx]{d: d, b: b}, nil)
	res := tw.Work(ctx, t, taskArgs{Do: "complete_tx"}, nil)
	if res.Err != nil || res.Job.State != leasetype.JobStateCompleted || !slices.Equal(outcomes(res), []leasetype.AttemptOutcome{leasetype.OutcomeCompleted}) {
		t.Fatalf("err %v, state %s, outcomes %v", res.Err, res.Job.State, outcomes(res))
	}
}

func TestWorkerFailures(t *testing.T) {
	onBoth(t, testWorkerFailures[*sql.Tx], testWorkerFailures[pgx.Tx])
}

// testWorkerFailures: misuse and timeouts are reported with what was found.
func testWorkerFailures[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	app := newInserter(t, d)

	t.Run("BadWorkerOpts", func(t *testing.T) {
		ft := &fakeTB{}
		if tw := leaseholdtest.NewWorker(ft, d, testConfig(), &taskWorker[TTx]{}, &leasehold.WorkerOpts{LeaseTTL: time.Millisecond}); tw != nil {
			t.Fatalf("NewWorker returned a worker for invalid options")
		}
		ft.requireFatal(t, "NewWorker", "LeaseTTL 1ms is below the minimum")
	})

	tw := leaseholdtest.NewWorker(t, d, testConfig(), &taskWorker[TTx]{}, nil)

	t.Run("UniqueKeyTaken", func(t *testing.T) {
		held := insert(t, app, taskArgs{Do: "ok"}, &leasehold.InsertOpts{Queue: "held", UniqueKey: "only-once"}).Job
		ft := &fakeTB{}
		if res := tw.Work(ctx, ft, taskArgs{Do: "ok"}, &leasehold.InsertOpts{UniqueKey: "only-once"}); res != nil {
			t.Fatalf("Work returned a result for a skipped insert")
		}
		ft.requireFatal(t, `unique key "only-once" is held by job `+strconv.FormatInt(held.ID, 10), "WorkJob")
	})

	t.Run("ScheduledLater", func(t *testing.T) {
		ft := &fakeTB{}
		tw.Work(ctx, ft, taskArgs{Do: "ok"}, &leasehold.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		ft.requireFatal(t, "was inserted as scheduled", "due now")

		job := insert(t, app, taskArgs{Do: "ok"}, &leasehold.InsertOpts{Queue: "later", ScheduledAt: time.Now().Add(time.Hour)}).Job
		ft = &fakeTB{}
		tw.WorkJob(ctx, ft, job)
		ft.requireFatal(t, "job "+strconv.FormatInt(job.ID, 10)+" is not claimable now: state scheduled")
	})

	t.Run("WrongKind", func(t *testing.T) {
		job := insert(t, app, smsArgs{Number: "1"}, &leasehold.InsertOpts{Queue: "sms"}).Job
		ft := &fakeTB{}
		tw.WorkJob(ctx, ft, job)
		ft.requireFatal(t, `is of kind "sms", this worker runs "task"`)
	})

	t.Run("NotAloneInQueue", func(t *testing.T) {
		job := insert(t, app, taskArgs{Do: "ok"}, &leasehold.InsertOpts{Queue: "shared"}).Job
		other := insert(t, app, emailArgs{To: "x"}, &leasehold.InsertOpts{Queue: "shared"}).Job
		ft := &fakeTB{}
		tw.WorkJob(ctx, ft, job)
		ft.requireFatal(t, `not the only claimable job in queue "shared"`, "job "+strconv.FormatInt(other.ID, 10)+`: kind "email"`)
		// Nothing was claimed.
		for _, id := range []int64{job.ID, other.ID} {
			if row, err := d.GetExecutor().JobGet(ctx, &driver.JobGetParams{ID: id}); err != nil || row.State != leasetype.JobStateAvailable || row.Attempt != 0 {
				t.Fatalf("job %d after a refused WorkJob: %+v, %v", id, row, err)
			}
		}
	})

	t.Run("Deadline", func(t *testing.T) {
		// Long enough for the claim on a slow machine: the wait is what times out.
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		ft := &fakeTB{}
		start := time.Now()
		if res := tw.Work(ctx, ft, taskArgs{Do: "wait"}, nil); res != nil {
			t.Fatalf("Work returned a result past its deadline")
		}
		ft.requireFatal(t, "did not end before the deadline", "handler still running", "state running")
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("Work took %s to give up", took)
		}
	})
}
