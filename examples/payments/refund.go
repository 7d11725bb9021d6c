package payments

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/leasetype"
)

// RefundKind is the kind of the refund job. Refunds run in ChargeQueue:
// they call the PSP for the merchant as charges do, so the queue's
// per-merchant KeyRateLimit counts them with the charges.
const RefundKind = "payments.refund"

// RefundIdempotencyKey returns the PSP idempotency key of a payment's
// refund: every attempt sends the same one, so the PSP refunds once.
func RefundIdempotencyKey(paymentID string) string { return "refund-" + paymentID }

// RefundArgs are the arguments of a payment's refund job.
type RefundArgs struct {
	// PaymentID is the payment to refund.
	PaymentID string `json:"payment_id"`
	// CustomerID is the payment's customer: the job's sequence, shared with
	// the payment's charge, so the refund starts only after the charge
	// (inserted before it) finished.
	CustomerID string `json:"customer_id"`
	// MerchantID is the payment's merchant, the job's flow key.
	MerchantID string `json:"merchant_id,omitempty"`
}

// Kind implements leasehold.JobArgs.
func (RefundArgs) Kind() string { return RefundKind }

// InsertOpts puts refund jobs in the charge queue.
func (RefundArgs) InsertOpts() leasehold.InsertOpts {
	return leasehold.InsertOpts{Queue: ChargeQueue}
}

// RequestRefund enqueues the refund of a payment: one job per payment (its
// unique key), in the payment's customer sequence after the jobs of the
// customer inserted before it, its charge included, with the merchant as
// its flow key. Call it after the payment's creation committed.
func (s *Store[TTx]) RequestRefund(ctx context.Context, client *leasehold.Client[TTx], paymentID string) (*leasehold.InsertResult, error) {
	p, err := s.Get(ctx, paymentID)
	if err != nil {
		return nil, err
	}
	customer := p.CustomerID
	if customer == "" {
		customer = p.ID
	}
	res, err := client.Insert(ctx, RefundArgs{PaymentID: p.ID, CustomerID: customer, MerchantID: p.MerchantID},
		&leasehold.InsertOpts{UniqueKey: "refund:" + p.ID, Key: p.MerchantID, Sequence: customer})
	if err != nil {
		return nil, fmt.Errorf("payments: enqueue refund of %s: %w", p.ID, err)
	}
	return res, nil
}

// RefundWorker refunds captured payments: the worker of RefundArgs jobs.
// Register it with AddRefundWorker.
type RefundWorker[TTx any] struct {
	// Store is the payments table.
	Store *Store[TTx]
	// PSP is the provider to refund at.
	PSP *psp.Client
	// Retry is the backoff after transient PSP errors; nil means
	// exponential from 1 s to 1 min with 50% jitter.
	Retry leasehold.RetryPolicy
	// MaxAttempts bounds the attempts of a refund; zero means 10.
	MaxAttempts int
	// LeaseTTL is the lease of a refund; zero means the client's default.
	LeaseTTL time.Duration
	// CallDeadline is ChargeWorker.CallDeadline's, for the refund call.
	CallDeadline time.Duration
	// UnsettledWait is how long a refund whose payment is still pending
	// after its charge job finished (discarded, left to the Reconciler)
	// snoozes before looking again; zero means 1 s.
	UnsettledWait time.Duration

	stats refundCounters
}

type refundCounters struct {
	refunded, skipped, alreadyRefunded, early, unsettled, transient, rejected, fenced, late atomic.Int64
}

// RefundStats are a RefundWorker's counters.
type RefundStats struct {
	// Refunded counts refunds recorded by the worker.
	Refunded int64
	// Skipped counts refunds of payments that were never charged (declined
	// or failed): nothing to refund, the job completes.
	Skipped int64
	// AlreadyRefunded counts jobs whose payment was refunded already.
	AlreadyRefunded int64
	// Early counts attempts that found their payment's charge job not
	// finished: the customer's sequence was not kept. Zero when it is.
	Early int64
	// Unsettled counts attempts that found the charge job finished but its
	// payment still pending (the Reconciler settles it) and snoozed.
	Unsettled int64
	// TransientErrors counts attempts retried after a retryable PSP error;
	// Rejected refunds the PSP refused for good; Fenced recordings rolled
	// back because the lease was lost; LateAttempts attempts past their
	// CallDeadline.
	TransientErrors, Rejected, Fenced, LateAttempts int64
}

// Stats returns the worker's counters.
func (w *RefundWorker[TTx]) Stats() RefundStats {
	s := &w.stats
	return RefundStats{
		Refunded: s.refunded.Load(), Skipped: s.skipped.Load(), AlreadyRefunded: s.alreadyRefunded.Load(), Early: s.early.Load(),
		Unsettled: s.unsettled.Load(), TransientErrors: s.transient.Load(), Rejected: s.rejected.Load(), Fenced: s.fenced.Load(),
		LateAttempts: s.late.Load(),
	}
}

// Opts returns the worker options a refund needs: the customer's sequence
// (SequenceBy customer_id, policy continue, as the charge's: see
// ChargeWorker.Opts), and an expiry policy of retry: a refund repeated
// after a lost lease sends the same idempotency key, and the PSP answers
// with the first refund instead of refunding again.
func (w *RefundWorker[TTx]) Opts() *leasehold.WorkerOpts {
	retry := w.Retry
	if retry == nil {
		retry = leasehold.ExponentialBackoff{Base: time.Second, Max: time.Minute, Jitter: 0.5}
	}
	attempts := w.MaxAttempts
	if attempts == 0 {
		attempts = 10
	}
	return &leasehold.WorkerOpts{ExpiryPolicy: leasetype.ExpiryRetry, Retry: retry, MaxAttempts: attempts, LeaseTTL: w.LeaseTTL,
		SequenceBy: []string{"customer_id"}, SequencePolicy: leasehold.SequenceContinue}
}

// Work refunds one payment: a succeeded payment is refunded at the PSP
// and the refund recorded on it, with its ledger entry, in the transaction
// that completes the job (Client.CompleteTx, fenced by the lease); a
// payment never charged is left alone and the job completes.
func (w *RefundWorker[TTx]) Work(ctx context.Context, job *leasehold.Job[RefundArgs]) error {
	client, err := leasehold.ClientFromContext[TTx](ctx)
	if err != nil {
		return err
	}
	p, err := w.Store.Get(ctx, job.Args.PaymentID)
	if errors.Is(err, ErrPaymentNotFound) {
		return leasehold.Permanent(err)
	}
	if err != nil {
		return err
	}
	if p.PSPRefundID != "" {
		w.stats.alreadyRefunded.Add(1)
		return nil
	}
	// The customer's sequence started this job after the charge finished;
	// check it (the demo counts what this finds).
	if p.ChargeJobID != 0 {
		charge, err := client.JobGet(ctx, p.ChargeJobID)
		switch {
		case errors.Is(err, leasehold.ErrNotFound):
		case err != nil:
			return err
		case !charge.State.Finalized():
			w.stats.early.Add(1)
			return fmt.Errorf("refund of %s started while its charge job %d is %s", p.ID, charge.ID, charge.State)
		}
	}
	switch p.Status {
	case StatusFailed:
		w.stats.skipped.Add(1)
		return nil
	case StatusPending:
		// The charge job gave up; the Reconciler settles the payment from
		// the PSP's answer. Wait for it without spending attempts.
		w.stats.unsettled.Add(1)
		wait := w.UnsettledWait
		if wait <= 0 {
			wait = time.Second
		}
		return leasehold.Snooze(wait)
	}
	if p.PSPChargeID == "" {
		w.stats.rejected.Add(1)
		return leasehold.Permanent(fmt.Errorf("refund of %s: the succeeded payment has no PSP charge", p.ID))
	}
	callCtx, cancel, err := callContext(ctx, job.JobRow, w.CallDeadline)
	if err != nil {
		w.stats.late.Add(1)
		return err
	}
	defer cancel()
	ch, err := w.PSP.Refund(callCtx, RefundIdempotencyKey(p.ID), p.PSPChargeID)
	if err != nil {
		if psp.IsRetryable(err) {
			w.stats.transient.Add(1)
			return fmt.Errorf("refund payment %s (attempt %d): %w", p.ID, job.Attempt, err)
		}
		w.stats.rejected.Add(1)
		return leasehold.Permanent(fmt.Errorf("refund payment %s: %w", p.ID, err))
	}
	return w.record(ctx, client, job, ch)
}

// record writes the refund on the payment, with its ledger entry, and
// completes the job in one transaction fenced by the lease token.
func (w *RefundWorker[TTx]) record(ctx context.Context, client *leasehold.Client[TTx], job *leasehold.Job[RefundArgs], ch *psp.Charge) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := w.Store.Begin(ctx)
	if err != nil {
		return fmt.Errorf("record refund of %s: begin: %w", job.Args.PaymentID, err)
	}
	defer w.Store.Rollback(ctx, tx) //nolint:errcheck // no-op after commit
	recorded, err := w.Store.RefundTx(ctx, tx, job.Args.PaymentID, ch.ID, job.Token())
	if err != nil {
		return err
	}
	if err := client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		if leasehold.IsLeaseLost(err) {
			w.stats.fenced.Add(1)
		}
		return err
	}
	if err := w.Store.Commit(ctx, tx); err != nil {
		return fmt.Errorf("record refund of %s: commit: %w", job.Args.PaymentID, err)
	}
	if recorded {
		w.stats.refunded.Add(1)
	} else {
		w.stats.alreadyRefunded.Add(1)
	}
	return nil
}

// AddRefundWorker registers the refund worker with its options.
func AddRefundWorker[TTx any](ws *leasehold.Workers, w *RefundWorker[TTx]) error {
	return leasehold.AddWorkerSafely[RefundArgs](ws, w, w.Opts())
}
