package demo

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/leasetype"
)

// Summary is the outcome of a demo run, checked against the PSP's ledger.
type Summary struct {
	// Payments is how many payments the run set out to create.
	Payments int64 `json:"payments"`
	// NotCreated counts payments the run could not create (the database
	// failed or the run timed out first). Must be 0.
	NotCreated int64 `json:"not_created"`
	// Settled counts payments settled (Succeeded + Failed).
	Settled int64 `json:"settled"`
	// Succeeded and Failed split Settled.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	// Pending counts payments still pending at the end. Must be 0.
	Pending int64 `json:"pending"`
	// PSPCharges counts successful charges in the PSP's ledger for this run.
	PSPCharges int64 `json:"psp_charges"`
	// DoubleCharges counts payments charged more than once. Must be 0.
	DoubleCharges int64 `json:"double_charges"`
	// DoubleAuthorizations counts payments the PSP authorized more than
	// once, and DoubleCaptures captures of a charge captured already (both
	// from the PSP's own records). Must be 0.
	DoubleAuthorizations int64 `json:"double_authorizations"`
	DoubleCaptures       int64 `json:"double_captures"`
	// ResumedAttempts counts charge attempts that began at a stage an
	// earlier attempt recorded (after a crash, a pause or a PSP error), and
	// StagesSkipped the recorded stages they did not run again.
	ResumedAttempts int64 `json:"resumed_attempts"`
	StagesSkipped   int64 `json:"stages_skipped"`
	// AuthorizeCalls and CaptureCalls count the PSP calls of each stage.
	AuthorizeCalls int64 `json:"authorize_calls"`
	CaptureCalls   int64 `json:"capture_calls"`
	// SucceededCents sums the amounts of the succeeded payments.
	SucceededCents int64 `json:"succeeded_cents"`
	// Merchants is how many merchants the run paid out.
	Merchants int64 `json:"merchants"`
	// Payouts and PayoutCents are the settlement report's count and sum of
	// the payout batch's payouts; LedgerEntries and LedgerCents the ledger
	// of the merchants it covers.
	Payouts       int64 `json:"payouts"`
	PayoutCents   int64 `json:"payout_cents"`
	LedgerEntries int64 `json:"ledger_entries"`
	LedgerCents   int64 `json:"ledger_cents"`
	// PayoutsBalanced: the report exists, one payout per merchant, and its
	// totals equal the ledger's and the succeeded payments'. Must be true.
	PayoutsBalanced bool `json:"payouts_balanced"`
	// ReportAfterPayouts: the settlement report ran after every payout job
	// completed (the graph's fan-in): it counted each merchant's payout,
	// and every payout job is completed. Must be true.
	ReportAfterPayouts bool `json:"report_after_payouts"`
	// CustomerOverlaps counts charge requests the PSP received while
	// another charge request of the same customer was being answered: the
	// charge queue runs one charge per customer at a time. Must be 0.
	CustomerOverlaps int64 `json:"customer_overlaps"`
	// Customers is how many customers the payments belong to.
	Customers int64 `json:"customers"`
	// RefundsRequested counts the refund jobs inserted, each right after
	// its payment's creation; Refunded the payments refunded (recorded in
	// the database), RefundedCents their sum; RefundsSkipped the refunds of
	// payments never charged (declined or failed: nothing to refund).
	RefundsRequested int64 `json:"refunds_requested"`
	Refunded         int64 `json:"refunded"`
	RefundedCents    int64 `json:"refunded_cents"`
	RefundsSkipped   int64 `json:"refunds_skipped"`
	// PSPRefunds counts the refunds in the PSP's ledger for this run.
	PSPRefunds int64 `json:"psp_refunds"`
	// RefundsMissing counts requested refunds of succeeded payments not
	// refunded, and refunds the database and the PSP disagree on. Must be 0.
	RefundsMissing int64 `json:"refunds_missing"`
	// DoubleRefunds counts refunds of a charge refunded already, from the
	// PSP's records. Must be 0.
	DoubleRefunds int64 `json:"double_refunds"`
	// EarlyRefunds counts refund attempts that started before their
	// payment's charge job finished (found by the refund worker in the
	// database) plus refund requests the PSP received for a charge not
	// captured. Must be 0: the customer's sequence holds the refund.
	EarlyRefunds int64 `json:"early_refunds"`
	// RateLimited counts PSP requests answered 429 because their merchant
	// was over the PSP's limit. Must be 0: the charge queue's per-merchant
	// KeyRateLimit keeps under it.
	RateLimited int64 `json:"rate_limited"`
	// PSPMerchantLimit and PSPMerchantPeriodMS are the PSP's per-merchant
	// limit (0: none); QueueMerchantLimit the charge queue's KeyRateLimit
	// per merchant in the same period (0: none).
	PSPMerchantLimit    int64 `json:"psp_merchant_limit"`
	PSPMerchantPeriodMS int64 `json:"psp_merchant_period_ms"`
	QueueMerchantLimit  int64 `json:"queue_merchant_limit"`
	// Lost counts created payments missing from the database, and payments whose
	// status disagrees with the PSP's ledger (charged but not recorded
	// succeeded, or recorded succeeded without a charge). Must be 0.
	Lost int64 `json:"lost"`
	// LeaseExpiries counts expired leases reclaimed by the expirers.
	LeaseExpiries int64 `json:"lease_expiries"`
	// FencedWrites counts writes refused by the fencing token (renewals and
	// completions of workers that had lost their lease).
	FencedWrites int64 `json:"fenced_writes"`
	// FencedCompletions counts charge recordings (payment write plus
	// CompleteTx) rolled back because the lease was lost.
	FencedCompletions int64 `json:"fenced_completions"`
	// Reconciled counts stuck charge jobs resolved by reconciliation.
	Reconciled int64 `json:"reconciled"`
	// ReconciledSucceeded, ReconciledFailed and ReconciledRetried split it.
	ReconciledSucceeded int64 `json:"reconciled_succeeded"`
	ReconciledFailed    int64 `json:"reconciled_failed"`
	ReconciledRetried   int64 `json:"reconciled_retried"`
	// SettledByReconciler counts payments the reconciler settled.
	SettledByReconciler int64 `json:"settled_by_reconciler"`
	// Crashes and Pauses count the injected worker faults.
	Crashes int64 `json:"crashes"`
	Pauses  int64 `json:"pauses"`
	// PSPErrors, LostResponses, SlowResponses and Declines count the PSP's
	// injected behaviour; Replays its answers from an earlier request.
	PSPErrors     int64 `json:"psp_errors"`
	LostResponses int64 `json:"lost_responses"`
	SlowResponses int64 `json:"slow_responses"`
	Declines      int64 `json:"declines"`
	Replays       int64 `json:"replays"`
	// CreateRetries counts payment creations retried after a database error
	// (a restart, a failover); each retried payment was still created once.
	CreateRetries int64 `json:"create_retries"`
	// TransientErrors counts charge attempts retried with backoff.
	TransientErrors int64 `json:"transient_errors"`
	// WorkerClients counts the worker clients started, replacements included.
	WorkerClients int64 `json:"worker_clients"`
	// ElapsedMS is the run's duration in milliseconds.
	ElapsedMS int64 `json:"elapsed_ms"`
	// PerSecond is payments settled per second.
	PerSecond float64 `json:"per_second"`
	// LeaseTTLMS is the charge lease used, in milliseconds.
	LeaseTTLMS int64 `json:"lease_ttl_ms"`
	// Seed is the run's seed.
	Seed int64 `json:"seed"`
	// Problems lists up to 10 payments that failed a check.
	Problems []string `json:"problems,omitempty"`
}

// OK reports whether nothing was lost, doubled or left pending.
func (s *Summary) OK() bool {
	return s.Lost == 0 && s.DoubleCharges == 0 && s.DoubleAuthorizations == 0 && s.DoubleCaptures == 0 && s.CustomerOverlaps == 0 &&
		s.RefundsMissing == 0 && s.DoubleRefunds == 0 && s.EarlyRefunds == 0 && s.RateLimited == 0 &&
		s.Pending == 0 && s.NotCreated == 0 && s.Settled == s.Payments && s.PayoutsBalanced && s.ReportAfterPayouts
}

// summarize checks every payment of the run against the PSP's ledger and
// gathers the counters.
func (r *run[TTx]) summarize(ctx context.Context, ids []string, batch *payments.PayoutBatch, elapsed time.Duration) (*Summary, error) {
	// The database may be failing over as the run ends: read for up to 30 s.
	var rows []*payments.Payment
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		if rows, err = r.store.ListPrefix(ctx, "pay_"+r.cfg.RunID+"_"); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("demo: read payments: %w", err)
	}
	s := &Summary{Payments: int64(len(ids)), ElapsedMS: elapsed.Milliseconds(), LeaseTTLMS: r.cfg.LeaseTTL.Milliseconds(), Seed: r.cfg.Seed}
	problem := func(format string, args ...any) {
		if len(s.Problems) < 10 {
			s.Problems = append(s.Problems, fmt.Sprintf(format, args...))
		}
	}
	byID := make(map[string]*payments.Payment, len(rows))
	for _, p := range rows {
		byID[p.ID] = p
	}
	pspRefunded := map[string]bool{}
	for _, c := range r.psp.Ledger() {
		if c.Refunded {
			pspRefunded[c.Reference] = true
		}
	}
	for i, id := range ids {
		p := byID[id]
		if p == nil && !r.created[i].Load() {
			s.NotCreated++
			continue
		}
		captured := r.psp.CapturedFor(id)
		s.PSPCharges += int64(captured)
		if captured > 1 {
			s.DoubleCharges++
			problem("%s charged %d times", id, captured)
		}
		if p == nil {
			s.Lost++
			problem("%s missing from the payments table", id)
			continue
		}
		switch p.Status {
		case payments.StatusSucceeded:
			s.Succeeded++
			s.SucceededCents += p.AmountCents
			if captured == 0 {
				s.Lost++
				problem("%s recorded succeeded but the PSP never charged it", id)
			}
		case payments.StatusFailed:
			s.Failed++
			if captured > 0 {
				s.Lost++
				problem("%s recorded failed but the PSP charged it", id)
			}
		default:
			s.Pending++
			if captured > 0 {
				s.Lost++
			}
			problem("%s still pending (PSP charges: %d)", id, captured)
		}
		if p.SettledBy == payments.SettledByReconciler {
			s.SettledByReconciler++
		}
		s.summarizeRefund(p, r.refundRequested[i].Load(), pspRefunded[id], problem)
	}
	s.Settled = s.Succeeded + s.Failed
	if elapsed > 0 {
		s.PerSecond = float64(s.Settled) / elapsed.Seconds()
	}
	st := r.psp.Stats()
	s.PSPErrors, s.LostResponses, s.SlowResponses, s.Declines, s.Replays = st.InjectedErrors, st.LostResponses, st.SlowResponses, st.Declines, st.Replays
	s.CustomerOverlaps, s.Customers = st.CustomerOverlaps, int64(r.cfg.Customers)
	s.DoubleAuthorizations, s.DoubleCaptures = st.DoubleAuthorizations, st.DoubleCaptures
	s.DoubleRefunds, s.RateLimited, s.EarlyRefunds = st.DoubleRefunds, st.RateLimited, st.RefundsBeforeCapture
	s.PSPMerchantLimit, s.PSPMerchantPeriodMS = int64(r.cfg.MerchantRateLimit), r.cfg.MerchantRatePeriod.Milliseconds()
	if r.merchantLimit != nil {
		s.QueueMerchantLimit = int64(r.merchantLimit.Limit)
	}
	if err := r.summarizePayouts(ctx, s, batch, problem); err != nil {
		return nil, err
	}
	s.Crashes, s.Pauses = r.crashes.Load(), r.pauses.Load()
	s.CreateRetries = r.createRetries.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	s.WorkerClients = int64(len(r.nodes))
	for _, n := range r.nodes {
		cs := n.client.Stats()
		s.LeaseExpiries += cs.Expired
		s.FencedWrites += cs.FencedWrites
		ch := n.charge.Stats()
		s.FencedCompletions += ch.Fenced
		s.TransientErrors += ch.TransientErrors
		s.ResumedAttempts += ch.ResumedAttempts
		s.StagesSkipped += ch.StagesSkipped
		s.AuthorizeCalls += ch.AuthorizeCalls
		s.CaptureCalls += ch.CaptureCalls
		rf := n.refund.Stats()
		s.EarlyRefunds += rf.Early
		s.FencedCompletions += rf.Fenced
		s.TransientErrors += rf.TransientErrors
		rs := n.recon.Stats()
		s.ReconciledSucceeded += rs.ResolvedSucceeded
		s.ReconciledFailed += rs.ResolvedFailed
		s.ReconciledRetried += rs.ResolvedRetry
	}
	s.Reconciled = s.ReconciledSucceeded + s.ReconciledFailed + s.ReconciledRetried
	return s, nil
}

// summarizeRefund checks one payment's refund against the PSP's ledger.
func (s *Summary) summarizeRefund(p *payments.Payment, requested, atPSP bool, problem func(string, ...any)) {
	if requested {
		s.RefundsRequested++
	}
	if atPSP {
		s.PSPRefunds++
	}
	refunded := p.PSPRefundID != ""
	if refunded {
		s.Refunded++
		s.RefundedCents += p.AmountCents
	}
	switch {
	case refunded != atPSP:
		s.RefundsMissing++
		problem("%s refunded in the database %t, at the PSP %t", p.ID, refunded, atPSP)
	case requested && p.Status == payments.StatusSucceeded && !refunded:
		s.RefundsMissing++
		problem("%s: refund requested, not made", p.ID)
	case requested && p.Status == payments.StatusFailed:
		s.RefundsSkipped++
	case !requested && refunded:
		s.RefundsMissing++
		problem("%s refunded without a request", p.ID)
	}
}

// summarizePayouts checks the payout batch's settlement report against the
// ledger and the succeeded payments, and the report's start against the
// payouts' completions.
func (r *run[TTx]) summarizePayouts(ctx context.Context, s *Summary, batch *payments.PayoutBatch, problem func(string, ...any)) error {
	s.Merchants = int64(r.cfg.Merchants)
	if batch == nil {
		problem("no payout batch: the charges did not settle")
		return nil
	}
	rep, err := r.store.GetReport(ctx, batch.BatchID)
	if err != nil {
		return fmt.Errorf("demo: read settlement report: %w", err)
	}
	entries, cents, err := r.store.LedgerTotal(ctx, "m_"+r.cfg.RunID+"_")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if rep == nil {
		problem("payout batch %s: no settlement report", batch.BatchID)
		return nil
	}
	s.Payouts, s.PayoutCents, s.LedgerEntries, s.LedgerCents = rep.Payouts, rep.PayoutCents, rep.LedgerEntries, rep.LedgerCents
	// The ledger holds an entry per succeeded payment and a negated one
	// per refund: the payouts pay the succeeded payments less the refunds.
	wantEntries, wantCents := s.Succeeded+s.Refunded, s.SucceededCents-s.RefundedCents
	s.PayoutsBalanced = rep.Balanced() && rep.Payouts == s.Merchants && rep.PayoutCents == wantCents &&
		rep.LedgerEntries == wantEntries && entries == wantEntries && cents == wantCents
	if !s.PayoutsBalanced {
		problem("payout batch %s: %d payouts of %d cents, ledger %d entries of %d cents (%d unpaid; all merchants: %d of %d), succeeded payments %d of %d cents, refunds %d of %d cents",
			batch.BatchID, rep.Payouts, rep.PayoutCents, rep.LedgerEntries, rep.LedgerCents, rep.UnpaidEntries, entries, cents, s.Succeeded, s.SucceededCents,
			s.Refunded, s.RefundedCents)
	}
	// The fan-in: the report counted every merchant's payout, so it ran
	// after each payout had committed (a payout's row commits with its
	// job's completion), and every payout job completed.
	client, err := leasehold.NewClient(r.d, &leasehold.Config{Logger: r.cfg.Logger})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	s.ReportAfterPayouts = rep.Payouts == s.Merchants
	for m, id := range batch.PayoutJobs {
		job, err := client.JobGet(ctx, id)
		if err != nil {
			return fmt.Errorf("demo: read payout job of %s: %w", m, err)
		}
		if job.State != leasetype.JobStateCompleted {
			s.ReportAfterPayouts = false
			problem("payout job %d of %s is %s", id, m, job.State)
		}
	}
	return nil
}

// cents formats an amount in cents as euros.
func cents(c int64) string { return fmt.Sprintf("EUR %d.%02d", c/100, c%100) }

// balanced describes the settlement report check.
func balanced(s *Summary) string {
	switch {
	case s.PayoutsBalanced && s.ReportAfterPayouts:
		return "ok  (after every payout; totals equal the ledger: the succeeded payments less the refunds)"
	case !s.ReportAfterPayouts:
		return "FAIL  (missing, or ran before a payout finished)"
	default:
		return "FAIL  (totals differ from the ledger)"
	}
}

// rateLimits describes the PSP's and the queue's per-merchant limits.
func rateLimits(s *Summary) string {
	if s.PSPMerchantLimit == 0 {
		return " (PSP limit off)"
	}
	queue := "none"
	if s.QueueMerchantLimit > 0 {
		queue = fmt.Sprintf("%d starts", s.QueueMerchantLimit)
	}
	return fmt.Sprintf(" (PSP: %d requests per merchant per %s; queue: %s)", s.PSPMerchantLimit, time.Duration(s.PSPMerchantPeriodMS)*time.Millisecond, queue)
}

// WriteTable writes the summary as a table a person can read.
func (s *Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	check := func(n int64) string {
		if n == 0 {
			return "0  ok"
		}
		return fmt.Sprintf("%d  FAIL", n)
	}
	rows := [][2]string{
		{"payments", fmt.Sprint(s.Payments)},
		{"settled", fmt.Sprintf("%d (succeeded %d, failed %d)", s.Settled, s.Succeeded, s.Failed)},
		{"pending at the end", check(s.Pending)},
		{"not created", check(s.NotCreated)},
		{"creations retried", fmt.Sprintf("%d (database errors; each payment still created once)", s.CreateRetries)},
		{"PSP charges", fmt.Sprintf("%d (one per succeeded payment)", s.PSPCharges)},
		{"double charges", check(s.DoubleCharges)},
		{"double authorizations / captures", fmt.Sprintf("%s / %s", check(s.DoubleAuthorizations), check(s.DoubleCaptures))},
		{"lost payments", check(s.Lost)},
		{"overlapping charges of a customer", check(s.CustomerOverlaps) + fmt.Sprintf(" (%d customers, one job each at a time, in insert order)", s.Customers)},
		{"refunds", fmt.Sprintf("%d requested: %d done (%s), %d skipped (not charged); PSP refunds %d", s.RefundsRequested, s.Refunded, cents(s.RefundedCents), s.RefundsSkipped, s.PSPRefunds)},
		{"refunds missing", check(s.RefundsMissing)},
		{"double refunds", check(s.DoubleRefunds)},
		{"refunds started before their charge finished", check(s.EarlyRefunds)},
		{"PSP 429s (merchant rate limit)", check(s.RateLimited) + rateLimits(s)},
		{"resumed attempts", fmt.Sprintf("%d (began at a recorded stage; %d stages skipped on retry)", s.ResumedAttempts, s.StagesSkipped)},
		{"PSP calls: authorize / capture", fmt.Sprintf("%d / %d (retries of a stage whose answer was lost included)", s.AuthorizeCalls, s.CaptureCalls)},
		{"payouts", fmt.Sprintf("%d of %d merchants, %s (ledger: %d entries, %s)", s.Payouts, s.Merchants, cents(s.PayoutCents), s.LedgerEntries, cents(s.LedgerCents))},
		{"settlement report", balanced(s)},
		{"", ""},
		{"worker crashes", fmt.Sprintf("%d (%d worker clients started)", s.Crashes, s.WorkerClients)},
		{"worker pauses", fmt.Sprint(s.Pauses)},
		{"PSP errors / lost responses / slow", fmt.Sprintf("%d / %d / %d (%d attempts retried with backoff)", s.PSPErrors, s.LostResponses, s.SlowResponses, s.TransientErrors)},
		{"PSP declines", fmt.Sprint(s.Declines)},
		{"lease expiries", fmt.Sprint(s.LeaseExpiries)},
		{"fenced writes refused", fmt.Sprintf("%d (%d charge recordings rolled back)", s.FencedWrites, s.FencedCompletions)},
		{"stuck jobs reconciled", fmt.Sprintf("%d (succeeded %d, failed %d, re-queued %d)", s.Reconciled, s.ReconciledSucceeded, s.ReconciledFailed, s.ReconciledRetried)},
		{"payments settled by reconciler", fmt.Sprint(s.SettledByReconciler)},
		{"", ""},
		{"elapsed", fmt.Sprintf("%.1fs", float64(s.ElapsedMS)/1000)},
		{"throughput", fmt.Sprintf("%.0f payments/s", s.PerSecond)},
	}
	for _, r := range rows {
		if r[0] == "" {
			fmt.Fprintln(tw, "\t") // a blank row that keeps the columns aligned
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\n", r[0], r[1])
	}
	for _, p := range s.Problems {
		fmt.Fprintf(tw, "  problem\t%s\n", p)
	}
	return tw.Flush()
}
