package payments_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/leasetype"
)

func fastRetry() leasehold.RetryPolicy {
	return leasehold.ExponentialBackoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: 0.5}
}

func TestCreateEnqueuesInTheSameTransaction(t *testing.T) {
	both(t, psp.Config{}, testCreate[*sql.Tx], testCreate[pgx.Tx])
}

func testCreate[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	c := e.client(nil, nil, 0)
	p := e.create(c, "pay_1")
	job, err := c.JobGet(ctx, p.ChargeJobID)
	if err != nil {
		t.Fatal(err)
	}
	if job.Kind != payments.ChargeKind || job.UniqueKey != "pay_1" || job.State != leasetype.JobStateAvailable {
		t.Fatalf("charge job = kind %s key %q state %s; want %s, pay_1, available", job.Kind, job.UniqueKey, job.State, payments.ChargeKind)
	}
	if got := e.payment("pay_1"); got.Status != payments.StatusPending || got.IdempotencyKey != "charge-pay_1" || got.ChargeJobID != job.ID {
		t.Fatalf("payment = %+v", got)
	}

	// Rolled back: neither the payment nor its job exists.
	tx, err := e.store.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateTx(ctx, tx, c, payments.NewPayment{ID: "pay_2", AmountCents: 5, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Rollback(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Get(ctx, "pay_2"); !errors.Is(err, payments.ErrPaymentNotFound) {
		t.Fatalf("rolled-back payment: Get = %v, want ErrPaymentNotFound", err)
	}
	if jobs, err := c.JobList(ctx, &leasehold.JobListParams{UniqueKey: "pay_2"}); err != nil || len(jobs) != 0 {
		t.Fatalf("rolled-back payment's job: %d jobs, %v; want none", len(jobs), err)
	}

	// The same payment twice: refused, and still one job.
	if _, err := e.store.Create(ctx, c, payments.NewPayment{ID: "pay_1", AmountCents: 5, Currency: "EUR"}); err == nil {
		t.Fatalf("creating pay_1 twice succeeded")
	}
	if jobs, err := c.JobList(ctx, &leasehold.JobListParams{UniqueKey: "pay_1"}); err != nil || len(jobs) != 1 {
		t.Fatalf("pay_1 jobs: %d, %v; want 1", len(jobs), err)
	}
}

// TestChargeWorker: through PSP errors and lost responses, every payment is
// charged exactly once and recorded by the worker in its fenced completion.
func TestChargeWorker(t *testing.T) {
	both(t, psp.Config{Seed: 3, ErrorRate: 0.3, LostResponseRate: 0.4}, testChargeWorker[*sql.Tx], testChargeWorker[pgx.Tx])
}

func testChargeWorker[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), MaxAttempts: 50}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, w, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
		t.Fatal(err)
	}
	// A long lease: this test is about PSP faults, and a loaded CI machine
	// must not turn a slow heartbeat into a stuck job that nothing reconciles.
	c := e.client(nil, ws, 10*time.Second)
	const n = 20
	for i := range n {
		e.create(c, fmt.Sprintf("pay_%02d", i))
	}
	waitFor(t, 30*time.Second, "all payments settled", func() bool {
		counts, err := e.store.CountPrefix(ctx, "pay_")
		return err == nil && counts.Succeeded == n
	})
	for i := range n {
		id := fmt.Sprintf("pay_%02d", i)
		p := e.payment(id)
		job := e.waitJob(c, p.ChargeJobID, leasetype.JobStateCompleted)
		if p.SettledBy != payments.SettledByWorker || p.SettledToken != job.LeaseToken || p.PSPChargeID == "" {
			t.Fatalf("%s: settled by %q token %d charge %q; want the worker, token %d", id, p.SettledBy, p.SettledToken, p.PSPChargeID, job.LeaseToken)
		}
		if got := e.psp.CapturedFor(id); got != 1 {
			t.Fatalf("%s charged %d times at the PSP, want 1", id, got)
		}
	}
	waitFor(t, 5*time.Second, "charges counted", func() bool { return w.Stats().Charged == n })
	st := w.Stats()
	if st.Charged != n || st.TransientErrors == 0 || st.Fenced != 0 {
		t.Fatalf("worker stats %+v: want %d charged, some transient errors, none fenced", st, n)
	}
	if ps := e.psp.Stats(); ps.LostResponses == 0 || ps.DoubleCharges != 0 || ps.Charges != n {
		t.Fatalf("PSP stats %+v: want lost responses, %d charges, no double charge", ps, n)
	}
}

func TestChargeWorkerDecline(t *testing.T) {
	both(t, psp.Config{DeclineRate: 1}, testDecline[*sql.Tx], testDecline[pgx.Tx])
}

func testDecline[TTx any](t *testing.T, e *env[TTx]) {
	w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry()}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, w, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
		t.Fatal(err)
	}
	c := e.client(nil, ws, 2*time.Second)
	p := e.create(c, "pay_declined")
	job := e.waitJob(c, p.ChargeJobID, leasetype.JobStateCompleted)
	got := e.payment("pay_declined")
	if got.Status != payments.StatusFailed || got.FailureReason != "declined: card_declined" || job.Attempt != 1 {
		t.Fatalf("declined payment = %+v after %d attempts; want failed at once", got, job.Attempt)
	}
	// The worker counts after its commit, which the job's state shows first.
	waitFor(t, 5*time.Second, "decline counted", func() bool { return w.Stats().Declined == 1 })
	if e.psp.CapturedFor("pay_declined") != 0 {
		t.Fatalf("a decline moved money")
	}
}

// TestReconcileStuck: charge jobs left stuck by a worker paused past its
// lease — after the PSP charged, after it declined, and before the PSP saw
// the charge — are settled by the reconciler from the PSP's answer; when the
// paused worker wakes up its writes are fenced and nothing is charged twice.
func TestReconcileStuck(t *testing.T) {
	t.Run("Charged", func(t *testing.T) {
		both(t, psp.Config{}, testReconcileStuck[*sql.Tx](false), testReconcileStuck[pgx.Tx](false))
	})
	t.Run("Declined", func(t *testing.T) {
		both(t, psp.Config{DeclineRate: 1}, testReconcileStuck[*sql.Tx](true), testReconcileStuck[pgx.Tx](true))
	})
}

func testReconcileStuck[TTx any](declined bool) func(t *testing.T, e *env[TTx]) {
	return func(t *testing.T, e *env[TTx]) {
		ctx := context.Background()
		release := make(chan struct{})
		var once sync.Map
		freezeOn := func(id, want string) {
			if id == want {
				if _, done := once.LoadOrStore(id, true); !done {
					<-release // paused, ignoring its context
				}
			}
		}
		w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), Hooks: &payments.Hooks{
			BeforeCharge: func(_ context.Context, j *leasehold.Job[payments.ChargeArgs]) {
				freezeOn(j.Args.PaymentID, "pay_before")
			},
			AfterCharge: func(_ context.Context, j *leasehold.Job[payments.ChargeArgs], _ *psp.Charge) {
				freezeOn(j.Args.PaymentID, "pay_after")
			},
		}}
		rec := &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC, PendingAfter: time.Hour}
		ws := leasehold.NewWorkers()
		if err := payments.AddWorkers(ws, w, rec); err != nil {
			t.Fatal(err)
		}
		// The lease must outlive the worker's way to the PSP (an HTTP call,
		// slow under the race detector on a loaded machine): the test needs
		// pay_after charged before its lease lapses.
		paused := e.client(pausedDriver[TTx]{e.d}, ws, 2*time.Second)
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		after := e.create(paused, "pay_after")
		before := e.create(paused, "pay_before")
		e.waitJob(paused, after.ChargeJobID, leasetype.JobStateStuck)
		e.waitJob(paused, before.ChargeJobID, leasetype.JobStateStuck)

		ops := e.client(nil, nil, 0)
		if err := rec.Reconcile(ctx, ops); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		wantStatus, wantJob, wantNote := payments.StatusSucceeded, leasetype.JobStateCompleted, "succeeded for key charge-pay_after"
		if declined {
			wantStatus, wantJob, wantNote = payments.StatusFailed, leasetype.JobStateDiscarded, "declined for key charge-pay_after"
		}
		job, err := ops.JobGet(ctx, after.ChargeJobID)
		if err != nil {
			t.Fatal(err)
		}
		p := e.payment("pay_after")
		if p.Status != wantStatus || p.SettledBy != payments.SettledByReconciler || job.State != wantJob || !strings.Contains(job.LastError, wantNote) {
			t.Fatalf("charged-then-stuck: payment %s by %q, job %s %q; want %s by reconciler, job %s noting %q",
				p.Status, p.SettledBy, job.State, job.LastError, wantStatus, wantJob, wantNote)
		}
		// The PSP never saw pay_before: re-queued, then charged by a worker.
		row := e.waitJob(paused, before.ChargeJobID, leasetype.JobStateCompleted)
		if !strings.Contains(row.LastError, "PSP has no charge for key charge-pay_before") {
			t.Fatalf("re-queued job's last error = %q, want the reconciler's note", row.LastError)
		}
		pb := e.payment("pay_before")
		if pb.Status != wantStatus || pb.SettledBy != payments.SettledByWorker {
			t.Fatalf("never-seen payment: %s by %q; want %s by the worker after the retry", pb.Status, pb.SettledBy, wantStatus)
		}
		rs := rec.Stats()
		if rs.Resolved() != 2 || rs.ResolvedRetry != 1 {
			t.Fatalf("reconciler stats %+v: want two resolved, one re-queued", rs)
		}

		// The paused worker wakes up: both of its recordings are fenced.
		close(release)
		waitFor(t, 10*time.Second, "both stale recordings fenced", func() bool { return w.Stats().Fenced == 2 })
		if p2 := e.payment("pay_after"); p2.Status != wantStatus || p2.SettledBy != payments.SettledByReconciler || p2.UpdatedAt != p.UpdatedAt {
			t.Fatalf("pay_after changed after the stale worker woke: %+v", p2)
		}
		wantCaptured := 1
		if declined {
			wantCaptured = 0
		}
		for _, id := range []string{"pay_after", "pay_before"} {
			if got := e.psp.CapturedFor(id); got != wantCaptured {
				t.Fatalf("%s charged %d times, want %d", id, got, wantCaptured)
			}
		}
		if paused.Stats().FencedWrites < 2 {
			t.Fatalf("client counted %d fenced writes, want at least 2", paused.Stats().FencedWrites)
		}
	}
}

// TestReconcileGaveUp: a payment whose charge job gave up is settled from
// the PSP's answer: succeeded when the PSP captured it (the capture's
// responses were lost), failed when the PSP never received it.
func TestReconcileGaveUp(t *testing.T) {
	both(t, psp.Config{LostCaptureRate: 1}, testReconcileGaveUp[*sql.Tx], testReconcileGaveUp[pgx.Tx])
}

func testReconcileGaveUp[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	down, err := psp.Start(psp.Config{ErrorRate: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	// Two workers in two clients: one whose responses are all lost, one
	// whose PSP is down. Each gives up after one attempt.
	lostW := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, MaxAttempts: 1}
	rec := &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC, PendingAfter: time.Millisecond}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, lostW, rec); err != nil {
		t.Fatal(err)
	}
	c := e.client(nil, ws, 2*time.Second)
	charged := e.create(c, "pay_lost")
	e.waitJob(c, charged.ChargeJobID, leasetype.JobStateDiscarded)
	if err := c.StopAndCancel(ctx); err != nil {
		t.Fatal(err)
	}
	downW := &payments.ChargeWorker[TTx]{Store: e.store, PSP: psp.NewClient(down.URL(), time.Second), MaxAttempts: 1}
	ws2 := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws2, downW, rec); err != nil {
		t.Fatal(err)
	}
	c2 := e.client(nil, ws2, 2*time.Second)
	never := e.create(c2, "pay_never")
	e.waitJob(c2, never.ChargeJobID, leasetype.JobStateDiscarded)

	time.Sleep(5 * time.Millisecond) // older than PendingAfter
	if err := rec.Reconcile(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if p := e.payment("pay_lost"); p.Status != payments.StatusSucceeded || p.SettledBy != payments.SettledByReconciler || e.psp.CapturedFor("pay_lost") != 1 {
		t.Fatalf("charged payment whose job gave up: %+v, captured %d", p, e.psp.CapturedFor("pay_lost"))
	}
	if p := e.payment("pay_never"); p.Status != payments.StatusFailed || !strings.Contains(p.FailureReason, "never received") {
		t.Fatalf("never-charged payment whose job gave up: %+v", p)
	}
}

func TestChargeOnePerCustomer(t *testing.T) {
	both(t, psp.Config{Seed: 5, MinLatency: 30 * time.Millisecond, MaxLatency: 30 * time.Millisecond},
		testChargeOnePerCustomer[*sql.Tx], testChargeOnePerCustomer[pgx.Tx])
}

// testChargeOnePerCustomer: a charge job's sequence is its customer (the
// payment's own ID when none is given) and its key its merchant; with many
// workers free the PSP never sees two charges of one customer at once, and
// sees each customer's charges in their insert order (without the
// customer's sequence, the six charges of a customer would overlap there,
// in any order).
func testChargeOnePerCustomer[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	inserter := e.client(nil, nil, 0)
	const customers, each = 3, 6
	for i := range customers * each {
		id := fmt.Sprintf("pay_c%02d", i)
		customer := fmt.Sprintf("cust-%d", i%customers)
		p, err := e.store.Create(ctx, inserter, payments.NewPayment{ID: id, AmountCents: 1999, Currency: "EUR", CustomerID: customer, MerchantID: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		if job, err := inserter.JobGet(ctx, p.ChargeJobID); err != nil || job.Sequence != customer || job.Key != "m1" {
			t.Fatalf("charge job of %s: sequence %q, key %q, %v; want its customer and merchant", id, job.Sequence, job.Key, err)
		}
	}
	own := e.create(inserter, "pay_own")
	if job, err := inserter.JobGet(ctx, own.ChargeJobID); err != nil || job.Sequence != "pay_own" || job.Key != "" {
		t.Fatalf("charge job of a payment without a customer or merchant: sequence %q, key %q, %v; want the payment ID, no key", job.Sequence, job.Key, err)
	}

	w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), MaxAttempts: 50}
	if opts := w.Opts(); fmt.Sprint(opts.SequenceBy) != "[customer_id]" || opts.SequencePolicy != leasehold.SequenceContinue {
		t.Fatalf("charge worker options: SequenceBy %v, policy %q; want [customer_id], continue", opts.SequenceBy, opts.SequencePolicy)
	}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, w, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
		t.Fatal(err)
	}
	e.client(nil, ws, 10*time.Second)
	waitFor(t, 30*time.Second, "all payments settled", func() bool {
		counts, err := e.store.CountPrefix(ctx, "pay_")
		return err == nil && counts.Succeeded == customers*each+1
	})
	if ps := e.psp.Stats(); ps.CustomerOverlaps != 0 || ps.Charges != customers*each+1 {
		t.Fatalf("PSP stats %+v: want %d charges and no overlapping charges of a customer", ps, customers*each+1)
	}
	// The PSP's ledger is in the order it received the authorizations.
	last := map[int]int{}
	for _, c := range e.psp.Ledger() {
		var n int
		if _, err := fmt.Sscanf(c.Reference, "pay_c%02d", &n); err != nil {
			continue
		}
		if prev, ok := last[n%customers]; ok && prev > n {
			t.Fatalf("customer %d: the PSP saw %s after pay_c%02d, inserted later", n%customers, c.Reference, prev)
		}
		last[n%customers] = n
	}
}
