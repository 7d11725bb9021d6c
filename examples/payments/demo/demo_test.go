package demo_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/demo"
	"github.com/leasehold/leasehold/examples/payments/internal/testdb"
)

// smallRun is a short run with every fault switched on, more often than the
// defaults so that 200 payments see each of them.
func smallRun(progress *bytes.Buffer) demo.Config {
	return demo.Config{
		Payments: 200, Workers: 3, Concurrency: 6, Seed: 7, Timeout: 90 * time.Second,
		LeaseTTL: 3 * time.Second, ReconcileEvery: 300 * time.Millisecond, PendingAfter: 5 * time.Second,
		Crashes: 2, Pauses: 3, PSPErrorRate: 0.1, LostResponseRate: 0.05, SlowRate: 0.02, DeclineRate: 0.1,
		PSPTimeout: 300 * time.Millisecond, Progress: progress,
	}
}

func checkSummary(t *testing.T, sum *demo.Summary, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("demo run: %v (summary %+v)", err, sum)
	}
	if !sum.OK() || sum.Lost != 0 || sum.DoubleCharges != 0 || sum.Pending != 0 || sum.Settled != 200 {
		t.Fatalf("summary not clean: %+v", sum)
	}
	if sum.PSPCharges != sum.Succeeded {
		t.Fatalf("PSP charges %d, succeeded payments %d: want equal", sum.PSPCharges, sum.Succeeded)
	}
	// The faults happened and were survived. A planned fault whose payment
	// was frozen on a crashed worker and settled by reconciliation never
	// fires, so fewer than planned may happen, never none.
	if sum.Crashes < 1 || sum.Crashes > 2 || sum.Pauses < 1 || sum.Pauses > 3 {
		t.Fatalf("crashes %d pauses %d, want 1-2 and 1-3", sum.Crashes, sum.Pauses)
	}
	if sum.LeaseExpiries == 0 || sum.FencedWrites == 0 || sum.FencedCompletions == 0 || sum.Reconciled == 0 {
		t.Fatalf("expiries %d, fenced writes %d, fenced completions %d, reconciled %d: want all above 0",
			sum.LeaseExpiries, sum.FencedWrites, sum.FencedCompletions, sum.Reconciled)
	}
	if sum.LostResponses == 0 || sum.PSPErrors == 0 || sum.Declines == 0 || sum.Failed == 0 {
		t.Fatalf("PSP faults not exercised: %+v", sum)
	}
	// The charges ran as stages: retries resumed at the recorded stage and
	// skipped what was done, and the PSP authorized and captured each
	// payment once.
	if sum.ResumedAttempts == 0 || sum.StagesSkipped < sum.ResumedAttempts || sum.DoubleAuthorizations != 0 || sum.DoubleCaptures != 0 {
		t.Fatalf("resumed attempts %d, stages skipped %d, double authorizations %d, double captures %d: want resumes, none twice",
			sum.ResumedAttempts, sum.StagesSkipped, sum.DoubleAuthorizations, sum.DoubleCaptures)
	}
	// Refunds ran after their charges, once each, within the PSP's
	// per-merchant rate limit.
	if sum.RefundsRequested == 0 || sum.Refunded == 0 || sum.Refunded != sum.PSPRefunds || sum.RefundsMissing != 0 ||
		sum.DoubleRefunds != 0 || sum.EarlyRefunds != 0 || sum.RateLimited != 0 || sum.QueueMerchantLimit == 0 {
		t.Fatalf("refunds %d requested, %d done, %d at the PSP, %d missing, %d twice, %d early; %d PSP 429s (queue limit %d): want refunds, none wrong",
			sum.RefundsRequested, sum.Refunded, sum.PSPRefunds, sum.RefundsMissing, sum.DoubleRefunds, sum.EarlyRefunds, sum.RateLimited, sum.QueueMerchantLimit)
	}
	// The payout graph paid every merchant once, and the report fanned in:
	// the succeeded payments less the refunds.
	net := sum.SucceededCents - sum.RefundedCents
	if !sum.PayoutsBalanced || !sum.ReportAfterPayouts || sum.Payouts != 5 || sum.PayoutCents != net || sum.LedgerCents != net {
		t.Fatalf("payouts: %d of %d cents (ledger %d, succeeded %d), balanced %t, after payouts %t; want 5 balanced",
			sum.Payouts, sum.PayoutCents, sum.LedgerCents, sum.SucceededCents, sum.PayoutsBalanced, sum.ReportAfterPayouts)
	}
}

// TestRunFailsOn429s: the run fails when the PSP answers 429s, here
// because the charge queue runs without its per-merchant rate limit under
// a PSP limit its workers exceed at once.
func TestRunFailsOn429s(t *testing.T) {
	t.Parallel()
	d, db := testdb.SQLite(t)
	cfg := demo.Config{
		// 10 authorizations at once, more than twice the limit of a window.
		Payments: 20, Merchants: 1, Workers: 1, Concurrency: 10, Seed: 3, Timeout: 60 * time.Second, Refunds: -1,
		Crashes: -1, Pauses: -1, PSPErrorRate: -1, LostResponseRate: -1, SlowRate: -1, DeclineRate: -1,
		MerchantRateLimit: 3, MerchantRatePeriod: 200 * time.Millisecond, NoQueueRateLimit: true,
	}
	sum, err := demo.Run[*sql.Tx](context.Background(), d, payments.NewSQLiteStore(db), cfg)
	if !errors.Is(err, demo.ErrFailed) || sum == nil || sum.RateLimited == 0 || sum.OK() {
		t.Fatalf("run without the queue's rate limit: %v, summary %+v; want ErrFailed with 429s", err, sum)
	}
	var table bytes.Buffer
	if err := sum.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(table.Bytes(), []byte("PSP 429s (merchant rate limit)")) || !bytes.Contains(table.Bytes(), []byte("queue: none")) {
		t.Fatalf("summary table lacks the 429 line:\n%s", table.String())
	}
}

func TestRunSQLite(t *testing.T) {
	t.Parallel()
	d, db := testdb.SQLite(t)
	var progress bytes.Buffer
	sum, err := demo.Run[*sql.Tx](context.Background(), d, payments.NewSQLiteStore(db), smallRun(&progress))
	checkSummary(t, sum, err)
	if !bytes.Contains(progress.Bytes(), []byte("settled")) {
		t.Fatalf("no progress lines written: %q", progress.String())
	}
	var table bytes.Buffer
	if err := sum.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	t.Logf("summary:\n%s", table.String())
	for _, want := range []string{"double charges", "0  ok", "lost payments", "stuck jobs reconciled", "resumed attempts", "double authorizations / captures", "settlement report",
		"refunds started before their charge finished", "double refunds", "PSP 429s"} {
		if !bytes.Contains(table.Bytes(), []byte(want)) {
			t.Fatalf("summary table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestRunPostgres(t *testing.T) {
	t.Parallel()
	d := testdb.Postgres(t)
	var progress bytes.Buffer
	sum, err := demo.Run[pgx.Tx](context.Background(), d, payments.NewPostgresStore(d.Pool()), smallRun(&progress))
	checkSummary(t, sum, err)
}
