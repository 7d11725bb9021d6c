package payments_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/leasetype"
)

// TestChargeResumesAtStage: a worker that vanishes between the authorize
// and the capture stage (paused past its lease after checkpointing the
// authorization) leaves the job stuck at stage authorize; the reconciler
// finds the charge authorized and re-queues it, and the retry resumes at
// the capture: the PSP receives one authorization request and one capture.
// When the stale worker wakes, its capture is answered from the PSP's
// record and its checkpoint is refused (fenced): nothing moves twice.
func TestChargeResumesAtStage(t *testing.T) {
	both(t, psp.Config{}, testChargeResumes[*sql.Tx], testChargeResumes[pgx.Tx])
}

func testChargeResumes[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	release := make(chan struct{})
	var releaseOnce sync.Once
	var crashed atomic.Bool
	w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), Hooks: &payments.Hooks{
		AfterAuthorize: func(_ context.Context, j *leasehold.Job[payments.ChargeArgs], _ *psp.Charge) {
			if crashed.CompareAndSwap(false, true) {
				<-release // gone between the stages, ignoring its context
			}
		},
	}}
	rec := &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC, PendingAfter: time.Hour}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, w, rec); err != nil {
		t.Fatal(err)
	}
	// The lease must outlive the way to the first checkpoint (a client
	// starting, an HTTP call: slow under the race detector on a loaded
	// machine), as no heartbeat renews it.
	paused := e.client(pausedDriver[TTx]{e.d}, ws, 3*time.Second)
	// Registered after the client's, so run before its stop: the frozen
	// handler returns.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	p := e.create(paused, "pay_resume")
	stuck := e.waitJob(paused, p.ChargeJobID, leasetype.JobStateStuck)
	if stuck.Stage != payments.StageAuthorize {
		h, err := e.client(nil, nil, 0).JobStages(ctx, p.ChargeJobID)
		t.Fatalf("stuck job recorded stage %q, want %q (attempt %d, last error %q, history %d rows %v, worker %+v)", stuck.Stage, payments.StageAuthorize, stuck.Attempt, stuck.LastError, len(h), err, w.Stats())
	}
	state, err := leasehold.StageStateOf[payments.ChargeState](stuck)
	if err != nil || state.ChargeID == "" || state.Captured {
		t.Fatalf("stuck job's stage state = %+v, %v; want the authorization, not captured", state, err)
	}

	ops := e.client(nil, nil, 0)
	if err := rec.Reconcile(ctx, ops); err != nil {
		t.Fatal(err)
	}
	job := e.waitJob(paused, p.ChargeJobID, leasetype.JobStateCompleted)
	if !strings.Contains(job.LastError, "authorized for key charge-pay_resume") {
		t.Fatalf("re-queued job's last error = %q, want the reconciler's note", job.LastError)
	}
	got := e.payment("pay_resume")
	if got.Status != payments.StatusSucceeded || got.SettledBy != payments.SettledByWorker || got.PSPChargeID != state.ChargeID {
		t.Fatalf("payment = %+v; want succeeded by the worker with charge %s", got, state.ChargeID)
	}
	if a, c := e.psp.AuthorizeRequestsFor("pay_resume"), e.psp.CaptureRequestsFor("pay_resume"); a != 1 || c != 1 {
		t.Fatalf("PSP received %d authorization and %d capture requests; want 1 and 1 (the retry must skip the recorded stage)", a, c)
	}
	if n := e.psp.CapturedFor("pay_resume"); n != 1 {
		t.Fatalf("captured %d times, want 1", n)
	}
	waitFor(t, 5*time.Second, "charge counted", func() bool { return w.Stats().Charged == 1 })
	if st := w.Stats(); st.ResumedAttempts != 1 || st.StagesSkipped != 1 || st.AuthorizeCalls != 1 || st.CaptureCalls != 1 {
		t.Fatalf("worker stats %+v: want one resumed attempt skipping one stage, one call per stage", st)
	}
	history, err := ops.JobStages(ctx, p.ChargeJobID)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	for _, h := range history {
		stages = append(stages, h.Stage)
	}
	if len(history) != 2 || history[0].Stage != payments.StageAuthorize || history[1].Stage != payments.StageCapture ||
		history[0].Attempt != 1 || history[1].Attempt != 2 {
		t.Fatalf("stage history %v; want authorize by attempt 1, capture by attempt 2", stages)
	}

	// The stale holder wakes and captures: the PSP answers from the first
	// capture (same key), and its checkpoint is refused.
	releaseOnce.Do(func() { close(release) })
	waitFor(t, 10*time.Second, "the stale checkpoint fenced", func() bool { return w.Stats().Fenced == 1 })
	if ps := e.psp.Stats(); ps.DoubleCaptures != 0 || ps.DoubleAuthorizations != 0 || ps.DoubleCharges != 0 || e.psp.CapturedFor("pay_resume") != 1 {
		t.Fatalf("after the stale worker woke: PSP stats %+v, captured %d; want nothing twice", ps, e.psp.CapturedFor("pay_resume"))
	}
	if again, err := ops.JobStages(ctx, p.ChargeJobID); err != nil || len(again) != 2 {
		t.Fatalf("stage history after the stale checkpoint: %d rows, %v; want still 2", len(again), err)
	}
	if p2 := e.payment("pay_resume"); p2.UpdatedAt != got.UpdatedAt || p2.SettledToken != got.SettledToken {
		t.Fatalf("payment changed after the stale worker woke: %+v", p2)
	}
}

// TestChargeRetryResumes: through PSP errors and lost responses on both
// stages, retries after a failed capture resume after the authorization,
// and no payment is authorized or captured twice.
func TestChargeRetryResumes(t *testing.T) {
	both(t, psp.Config{Seed: 11, ErrorRate: 0.3, LostResponseRate: 0.3}, testChargeRetryResumes[*sql.Tx], testChargeRetryResumes[pgx.Tx])
}

func testChargeRetryResumes[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), MaxAttempts: 50}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, w, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
		t.Fatal(err)
	}
	c := e.client(nil, ws, 10*time.Second)
	const n = 20
	for i := range n {
		e.create(c, "pay_r"+string(rune('a'+i)))
	}
	waitFor(t, 30*time.Second, "all payments settled", func() bool {
		counts, err := e.store.CountPrefix(ctx, "pay_r")
		return err == nil && counts.Succeeded == n
	})
	waitFor(t, 5*time.Second, "charges counted", func() bool { return w.Stats().Charged == n })
	st := w.Stats()
	if st.ResumedAttempts == 0 || st.StagesSkipped < st.ResumedAttempts {
		t.Fatalf("worker stats %+v: want resumed attempts, each skipping the authorization", st)
	}
	ps := e.psp.Stats()
	if ps.Authorizations != n || ps.Captures != n || ps.DoubleAuthorizations != 0 || ps.DoubleCaptures != 0 || ps.DoubleCharges != 0 {
		t.Fatalf("PSP stats %+v: want %d authorizations and captures, none twice", ps, n)
	}
	entries, cents, err := e.store.LedgerTotal(ctx, "")
	if err != nil || entries != n || cents != n*1999 {
		t.Fatalf("ledger: %d entries, %d cents, %v; want %d entries of 1999", entries, cents, err, n)
	}
}
