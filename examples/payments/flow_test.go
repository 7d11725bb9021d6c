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
)

func TestRefundAfterCharge(t *testing.T) {
	both(t, psp.Config{Seed: 3, MinLatency: 40 * time.Millisecond, MaxLatency: 40 * time.Millisecond},
		testRefundAfterCharge[*sql.Tx], testRefundAfterCharge[pgx.Tx])
}

// testRefundAfterCharge: refunds requested right after their payments'
// creation, all waiting before any worker starts, run only after their
// charge finished (the customer's sequence), refund once at the PSP, and
// write their ledger entries. Without the shared sequence the refund jobs
// would start next to their charges: the refund worker would find their
// charge jobs running (Early), and the PSP nothing captured.
func testRefundAfterCharge[TTx any](t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	inserter := e.client(nil, nil, 0)
	const n = 10
	for i := range n {
		id := fmt.Sprintf("pay_r%02d", i)
		if _, err := e.store.Create(ctx, inserter, payments.NewPayment{ID: id, AmountCents: 1000, Currency: "EUR",
			CustomerID: fmt.Sprintf("cust-%d", i), MerchantID: "m_r"}); err != nil {
			t.Fatal(err)
		}
		res, err := e.store.RequestRefund(ctx, inserter, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Job.Sequence != fmt.Sprintf("cust-%d", i) || res.Job.Key != "m_r" || res.Job.Queue != payments.ChargeQueue {
			t.Fatalf("refund job of %s: sequence %q, key %q, queue %q; want its customer, merchant, the charge queue", id, res.Job.Sequence, res.Job.Key, res.Job.Queue)
		}
		if again, err := e.store.RequestRefund(ctx, inserter, id); err != nil || !again.UniqueSkipped {
			t.Fatalf("second refund request of %s = %+v, %v; want the first job", id, again, err)
		}
	}
	charge := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), MaxAttempts: 50}
	refund := &payments.RefundWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), MaxAttempts: 50}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, charge, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
		t.Fatal(err)
	}
	if err := payments.AddRefundWorker(ws, refund); err != nil {
		t.Fatal(err)
	}
	e.client(nil, ws, 10*time.Second)
	waitFor(t, 30*time.Second, "every payment refunded", func() bool {
		counts, err := e.store.CountPrefix(ctx, "pay_r")
		// The worker counts a refund once its transaction committed.
		return err == nil && counts.Refunded == n && refund.Stats().Refunded == n
	}, func() string { return fmt.Sprintf("refund stats %+v, PSP %+v", refund.Stats(), e.psp.Stats()) })
	rs, ps := refund.Stats(), e.psp.Stats()
	if rs.Early != 0 || ps.RefundsBeforeCapture != 0 || ps.DoubleRefunds != 0 || ps.Refunds != n || rs.Refunded != n {
		t.Fatalf("refund stats %+v, PSP %+v: want %d refunds, none before its charge finished, none twice", rs, ps, n)
	}
	for i := range n {
		if p := e.payment(fmt.Sprintf("pay_r%02d", i)); p.Status != payments.StatusSucceeded || p.PSPRefundID != p.PSPChargeID || p.RefundToken == 0 {
			t.Fatalf("refunded payment %+v: want succeeded, refund of its charge recorded with its token", p)
		}
	}
	// A charge entry and a refund entry per payment: the merchant nets zero.
	if entries, cents, err := e.store.LedgerTotal(ctx, "m_r"); err != nil || entries != 2*n || cents != 0 {
		t.Fatalf("ledger of m_r: %d entries, %d cents, %v; want %d entries netting 0", entries, cents, err, 2*n)
	}
}

// rateTestPSP is the PSP of TestMerchantRateLimit: 6 requests per
// merchant per 200 ms window.
var rateTestPSP = psp.Config{Seed: 9, MinLatency: 2 * time.Millisecond, MaxLatency: 5 * time.Millisecond,
	MerchantRateLimit: 6, MerchantRatePeriod: 200 * time.Millisecond}

// rateTestDeadline is the workers' CallDeadline in TestMerchantRateLimit.
const rateTestDeadline = 200 * time.Millisecond

func TestMerchantRateLimit(t *testing.T) {
	limit, err := payments.MerchantKeyRateLimit(rateTestPSP.MerchantRateLimit, rateTestPSP.MerchantRatePeriod, rateTestDeadline)
	if err != nil {
		t.Fatal(err)
	}
	// 6 requests over the 3 queue windows a PSP window's requests can come
	// from (200 ms plus the 200 ms deadline), 2 requests a start: 1 start.
	if limit.Limit != 1 || limit.Period != rateTestPSP.MerchantRatePeriod {
		t.Fatalf("queue limit %+v, want 1 per 200ms", limit)
	}
	if _, err := payments.MerchantKeyRateLimit(5, time.Second, time.Second); err == nil {
		t.Fatal("a PSP limit of 5 per second allows no start per window under a 1 s deadline: want an error")
	}
	t.Run("Limited", func(t *testing.T) {
		both(t, rateTestPSP, testMerchantRateLimit[*sql.Tx](limit, 16, 0), testMerchantRateLimit[pgx.Tx](limit, 16, 0))
	})
	// The check can fail: without the queue's limit such charges, all at
	// once (more of them, for margin), exceed the PSP's.
	t.Run("Unlimited", func(t *testing.T) {
		both(t, rateTestPSP, testMerchantRateLimit[*sql.Tx](nil, 40, 1), testMerchantRateLimit[pgx.Tx](nil, 40, 1))
	})
}

// testMerchantRateLimit charges n payments of one merchant (2n PSP
// requests; unlimited, the workers make them in bursts, more than 6 in some
// 200 ms window) with the charge queue's KeyRateLimit limit, and checks the
// PSP's 429s: none with the limit and every payment charged, or (the
// negative control, limit nil) at least minLimited.
func testMerchantRateLimit[TTx any](limit *leasehold.RateLimit, n int, minLimited int64) func(*testing.T, *env[TTx]) {
	return func(t *testing.T, e *env[TTx]) {
		ctx := context.Background()
		e.merchantLimit = limit
		inserter := e.client(nil, nil, 0)
		for i := range n {
			if _, err := e.store.Create(ctx, inserter, payments.NewPayment{ID: fmt.Sprintf("pay_l%02d", i), AmountCents: 1000, Currency: "EUR",
				CustomerID: fmt.Sprintf("cust-%d", i), MerchantID: "m_l"}); err != nil {
				t.Fatal(err)
			}
		}
		w := &payments.ChargeWorker[TTx]{Store: e.store, PSP: e.pspC, Retry: fastRetry(), MaxAttempts: 100, CallDeadline: rateTestDeadline}
		ws := leasehold.NewWorkers()
		if err := payments.AddWorkers(ws, w, &payments.Reconciler[TTx]{Store: e.store, PSP: e.pspC}); err != nil {
			t.Fatal(err)
		}
		e.client(nil, ws, 10*time.Second)
		if minLimited > 0 {
			// Unlimited, the charges retry their 429s in a stampede that may
			// take long to drain: seeing the 429s is enough.
			waitFor(t, 30*time.Second, "PSP 429s", func() bool { return e.psp.Stats().RateLimited >= minLimited },
				func() string { return fmt.Sprintf("PSP %+v", e.psp.Stats()) })
			t.Logf("PSP 429s: %d (queue limit none)", e.psp.Stats().RateLimited)
			return
		}
		waitFor(t, 60*time.Second, "every payment charged", func() bool {
			counts, err := e.store.CountPrefix(ctx, "pay_l")
			return err == nil && counts.Succeeded == int64(n)
		}, func() string { return fmt.Sprintf("charge stats %+v, PSP %+v", w.Stats(), e.psp.Stats()) })
		st := e.psp.Stats()
		if st.RateLimited != 0 {
			t.Fatalf("PSP answered %d requests with 429 under the queue limit %+v, want none; PSP %+v", st.RateLimited, limit, st)
		}
		if st.Charges != int64(n) || st.DoubleCharges != 0 {
			t.Fatalf("PSP %+v: want %d charges, none twice", st, n)
		}
	}
}
