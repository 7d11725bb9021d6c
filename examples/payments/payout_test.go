package payments_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/leasetype"
)

// TestPayoutBatch: after the charges, a payout graph pays each merchant its
// ledger once (fan-out) and the settlement report runs after every payout
// (fan-in), with totals equal to the ledger's.
func TestPayoutBatch(t *testing.T) {
	both(t, psp.Config{Seed: 2, DeclineRate: 0.2}, testPayoutBatch[*sql.Tx], testPayoutBatch[pgx.Tx])
}

func testPayoutBatch[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry()}
	pw := &payments.PayoutWorker[TTx]{Store: e.store}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, w, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
		t.Fatal(err)
	}
	if err := payments.AddPayoutWorkers(ws, pw); err != nil {
		t.Fatal(err)
	}
	c := e.client(nil, ws, 10*time.Second)
	const n, merchants = 24, 3
	var want [merchants]int64
	for i := range n {
		amount := int64(100 + i)
		if _, err := e.store.Create(ctx, c, payments.NewPayment{ID: fmt.Sprintf("pay_p%02d", i), AmountCents: amount, Currency: "EUR",
			MerchantID: fmt.Sprintf("m%d", i%merchants)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "all payments settled", func() bool {
		counts, err := e.store.CountPrefix(ctx, "pay_p")
		return err == nil && counts.Pending == 0 && counts.Total == n
	})
	var total int64
	for i := range n {
		if p := e.payment(fmt.Sprintf("pay_p%02d", i)); p.Status == payments.StatusSucceeded {
			want[i%merchants] += p.AmountCents
			total += p.AmountCents
		}
	}
	batch, err := payments.InsertPayoutBatch(ctx, c, "b1", []string{"m0", "m1", "m2"})
	if err != nil {
		t.Fatal(err)
	}
	for m, id := range batch.PayoutJobs {
		if job := e.waitJob(c, id, leasetype.JobStateCompleted); job.Attempt != 1 {
			t.Fatalf("payout job of %s took %d attempts", m, job.Attempt)
		}
	}
	e.waitJob(c, batch.ReportJob, leasetype.JobStateCompleted)
	for i, m := range []string{"m0", "m1", "m2"} {
		job, err := c.JobGet(ctx, batch.PayoutJobs[m])
		if err != nil || job.State != leasetype.JobStateCompleted {
			t.Fatalf("payout job of %s: %+v, %v; want completed", m, job, err)
		}
		p, err := e.store.GetPayout(ctx, "b1", m)
		if err != nil || p == nil || p.AmountCents != want[i] {
			t.Fatalf("payout of %s = %+v, %v; want %d cents", m, p, err, want[i])
		}
	}
	rep, err := e.store.GetReport(ctx, "b1")
	if err != nil || rep == nil || !rep.Balanced() || rep.Payouts != merchants || rep.PayoutCents != total || rep.LedgerCents != total {
		t.Fatalf("report = %+v, %v; want %d payouts of %d cents, balanced", rep, err, merchants, total)
	}
	// A second batch finds nothing left to pay.
	b2, err := payments.InsertPayoutBatch(ctx, c, "b2", []string{"m0", "m1", "m2"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitJob(c, b2.ReportJob, leasetype.JobStateCompleted)
	if rep2, err := e.store.GetReport(ctx, "b2"); err != nil || rep2.PayoutCents != 0 || rep2.LedgerCents != total || rep2.UnpaidEntries != 0 {
		t.Fatalf("second batch report = %+v, %v; want nothing paid, the ledger as before", rep2, err)
	}
	// The worker counts after its commit, which the job's state shows first.
	waitFor(t, 5*time.Second, "payouts and reports counted", func() bool {
		st := pw.Stats()
		return st.Payouts == 2*merchants && st.Reports == 2
	}, func() string { return fmt.Sprintf("stats %+v", pw.Stats()) })
}
