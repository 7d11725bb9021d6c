package drivertest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientCancelRunning: JobCancel on a running job, called through
// another client, cancels the handler's context within a second (cause
// ErrJobCancelled); the attempt is recorded as cancelled and the job never
// runs again.
func testClientCancelRunning[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := newBlockWorker(t, false)
	env.client(nil, leasehold.Config{Workers: workersFor(w, nil)})
	admin := env.client(nil, leasehold.Config{})
	job := insert(t, admin, blockArgs{Name: "to-cancel"}, nil)
	recvJob(t, w.started, 5*time.Second)

	asked := time.Now()
	row, err := admin.JobCancel(context.Background(), job.ID)
	if err != nil {
		t.Fatalf("JobCancel(running): %v", err)
	}
	if row.State != leasetype.JobStateRunning || row.CancelRequestedAt == nil {
		t.Fatalf("JobCancel returned state %s, cancel requested at %v; want running with a request time", row.State, row.CancelRequestedAt)
	}
	select {
	case cause := <-w.ctxCause:
		took := time.Since(asked)
		if !errors.Is(cause, leasehold.ErrJobCancelled) {
			t.Fatalf("handler context cause = %v, want ErrJobCancelled", cause)
		}
		if took > time.Second {
			t.Fatalf("handler context done %s after JobCancel, want within 1 s", took)
		}
		t.Logf("handler context done %s after JobCancel", took)
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not cancelled 5 s after JobCancel")
	}
	final := env.waitState(job.ID, leasetype.JobStateCancelled, 5*time.Second)
	if final.FinalizedAt == nil {
		t.Fatal("cancelled job has no FinalizedAt")
	}
	if got := env.outcomes(job.ID); !slices.Equal(got, []leasetype.AttemptOutcome{leasetype.OutcomeCancelled}) {
		t.Fatalf("attempt outcomes = %v, want [cancelled]", got)
	}
	// It does not run again.
	time.Sleep(500 * time.Millisecond)
	if n := w.log.count(job.ID); n != 1 {
		t.Fatalf("job ran %d times, want 1", n)
	}
	if row := env.job(job.ID); row.State != leasetype.JobStateCancelled {
		t.Fatalf("job state %s after cancellation, want cancelled", row.State)
	}

	// Cancelling a finished job is refused and changes nothing.
	if _, err := admin.JobCancel(context.Background(), job.ID); !errors.Is(err, leasehold.ErrJobState) {
		t.Fatalf("JobCancel(cancelled job) = %v, want ErrJobState", err)
	}
	// A waiting job is cancelled at once.
	waiting := insert(t, admin, blockArgs{Name: "later"}, &leasehold.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
	if row, err := admin.JobCancel(context.Background(), waiting.ID); err != nil || row.State != leasetype.JobStateCancelled {
		t.Fatalf("JobCancel(scheduled) = %v, %v; want cancelled", row, err)
	}
}

// testClientCancelCrashedHolder: a job whose holder dies after the
// cancellation was asked for ends cancelled when its lease expires, instead
// of running again.
func testClientCancelCrashedHolder[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	fd := newFaultDriver(env.d)
	w := newBlockWorker(t, false)
	dying := env.client(fd, leasehold.Config{ID: "dying", LeaseTTL: 500 * time.Millisecond, Workers: workersFor(w, nil)})
	job := insert(t, dying, blockArgs{Name: "orphan"}, nil)
	recvJob(t, w.started, 5*time.Second)
	survivor := newBlockWorker(t, false)
	survivor.releaseAll()
	other := env.client(nil, leasehold.Config{ID: "survivor", Workers: workersFor(survivor, nil)})
	fd.set(faultPartition) // the holder dies before it hears of the request
	if _, err := other.JobCancel(context.Background(), job.ID); err != nil {
		t.Fatalf("JobCancel: %v", err)
	}
	env.waitState(job.ID, leasetype.JobStateCancelled, 10*time.Second)
	if got := env.outcomes(job.ID); !slices.Equal(got, []leasetype.AttemptOutcome{leasetype.OutcomeLeaseExpired}) {
		t.Fatalf("attempt outcomes = %v, want [lease_expired]", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := survivor.log.count(job.ID); n != 0 {
		t.Fatalf("cancelled job ran %d times on the survivor, want 0", n)
	}
}
