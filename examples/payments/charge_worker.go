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

// Hooks are the charge worker's fault-injection seam, for the demo and
// tests: each is called, when set, at its point of the charge, and may block
// (a crashed or paused process) before returning. Production code leaves them nil.
type Hooks struct {
	// BeforeCharge runs after the payment is loaded, before the PSP call.
	BeforeCharge func(ctx context.Context, job *leasehold.Job[ChargeArgs])
	// AfterCharge runs after the PSP answered, before the outcome is recorded.
	AfterCharge func(ctx context.Context, job *leasehold.Job[ChargeArgs], charge *psp.Charge)
}

// ChargeWorker charges payments: the worker of ChargeArgs jobs. Register it
// with the options from Opts, whose expiry policy is stuck.
type ChargeWorker[TTx any] struct {
	// Store is the payments table.
	Store *Store[TTx]
	// PSP is the provider to charge.
	PSP *psp.Client
	// Retry is the backoff between attempts after transient PSP errors;
	// nil means exponential from 1 s to 1 min with 50% jitter.
	Retry leasehold.RetryPolicy
	// MaxAttempts bounds the attempts of a charge; zero means 10. A charge
	// that runs out is discarded and its payment left to the Reconciler.
	MaxAttempts int
	// LeaseTTL is the lease of a charge; zero means the client's default.
	LeaseTTL time.Duration
	// Hooks inject faults; nil for none.
	Hooks *Hooks

	stats chargeCounters
}

type chargeCounters struct {
	charged, declined, transient, rejected, fenced, alreadySettled atomic.Int64
}

// ChargeStats are a ChargeWorker's counters.
type ChargeStats struct {
	// Charged and Declined count outcomes recorded by the worker.
	Charged, Declined int64
	// TransientErrors counts attempts that failed with a retryable PSP error
	// (timeouts, lost responses, 5xx) and will be retried.
	TransientErrors int64
	// Rejected counts charges the PSP refused as invalid (not retried).
	Rejected int64
	// Fenced counts completions refused because the lease was lost: the
	// worker's transaction was rolled back and nothing was written.
	Fenced int64
	// AlreadySettled counts jobs whose payment was settled elsewhere first.
	AlreadySettled int64
}

// Stats returns the worker's counters.
func (w *ChargeWorker[TTx]) Stats() ChargeStats {
	s := &w.stats
	return ChargeStats{
		Charged: s.charged.Load(), Declined: s.declined.Load(), TransientErrors: s.transient.Load(),
		Rejected: s.rejected.Load(), Fenced: s.fenced.Load(), AlreadySettled: s.alreadySettled.Load(),
	}
}

// Opts returns the worker options a charge needs: expiry policy stuck (a
// charge whose worker vanished may have reached the PSP and is never re-run
// blindly), one charge per customer at a time (KeyBy customer_id, KeyLimit
// 1), and the worker's retry policy, attempts and lease.
func (w *ChargeWorker[TTx]) Opts() *leasehold.WorkerOpts {
	retry := w.Retry
	if retry == nil {
		retry = leasehold.ExponentialBackoff{Base: time.Second, Max: time.Minute, Jitter: 0.5}
	}
	attempts := w.MaxAttempts
	if attempts == 0 {
		attempts = 10
	}
	return &leasehold.WorkerOpts{ExpiryPolicy: leasetype.ExpiryStuck, Retry: retry, MaxAttempts: attempts, LeaseTTL: w.LeaseTTL,
		// One charge per customer at a time, in every queue and client.
		KeyBy: []string{"customer_id"}, KeyLimit: 1}
}

// Work charges one payment.
func (w *ChargeWorker[TTx]) Work(ctx context.Context, job *leasehold.Job[ChargeArgs]) error {
	p, err := w.Store.Get(ctx, job.Args.PaymentID)
	if errors.Is(err, ErrPaymentNotFound) {
		return leasehold.Permanent(err)
	}
	if err != nil {
		return err
	}
	if p.Status != StatusPending {
		// Settled by the reconciler while this job waited for a retry.
		w.stats.alreadySettled.Add(1)
		return nil
	}
	if w.Hooks != nil && w.Hooks.BeforeCharge != nil {
		w.Hooks.BeforeCharge(ctx, job)
	}
	// A worker whose lease is lost must not make outside effects: another
	// worker, or the reconciler, now owns the payment.
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	charge, err := w.PSP.Charge(ctx, p.IdempotencyKey, psp.ChargeRequest{Amount: p.AmountCents, Currency: p.Currency, Reference: p.ID, Customer: job.Args.CustomerID})
	if err != nil {
		if psp.IsRetryable(err) {
			// The outcome is unknown (timeout, lost response) or the PSP is
			// unavailable: retry with backoff and jitter. The next attempt
			// sends the same key, so the PSP answers with the original
			// result instead of charging again.
			w.stats.transient.Add(1)
			return fmt.Errorf("charge payment %s (attempt %d): %w", p.ID, job.Attempt, err)
		}
		// The PSP refused the request itself: retrying cannot help. The
		// payment stays pending; the reconciler fails it once it learns the
		// PSP holds no charge for it.
		w.stats.rejected.Add(1)
		return leasehold.Permanent(fmt.Errorf("charge payment %s: %w", p.ID, err))
	}
	if charge.Status != psp.StatusSucceeded && charge.Status != psp.StatusDeclined {
		w.stats.transient.Add(1)
		return fmt.Errorf("charge payment %s: PSP answered %s", p.ID, charge.Status)
	}
	if w.Hooks != nil && w.Hooks.AfterCharge != nil {
		w.Hooks.AfterCharge(ctx, job, charge)
	}
	return w.record(ctx, job, charge)
}

// record writes the PSP's answer on the payment and completes the job in one
// transaction fenced by the lease token.
func (w *ChargeWorker[TTx]) record(ctx context.Context, job *leasehold.Job[ChargeArgs], charge *psp.Charge) error {
	client, err := leasehold.ClientFromContext[TTx](ctx)
	if err != nil {
		return err
	}
	// The write is attempted even when ctx is done: the fencing token, not
	// this process's view, decides whether it may land. A lost lease rolls
	// it back; a stopping client's still-valid lease records the charge now
	// rather than leaving it to reconciliation.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st := Settlement{Status: StatusSucceeded, PSPChargeID: charge.ID, SettledBy: SettledByWorker, Token: job.Token()}
	if charge.Status == psp.StatusDeclined {
		// A decline is the PSP's final answer, never retried. It is recorded
		// and the job completed atomically (the job's work, settling the
		// payment, is done), rather than discarded with Permanent: a
		// discard cannot share the payment's transaction.
		st.Status, st.FailureReason = StatusFailed, "declined: "+charge.DeclineCode
	}
	tx, err := w.Store.Begin(ctx)
	if err != nil {
		return fmt.Errorf("record charge of %s: begin: %w", job.Args.PaymentID, err)
	}
	defer w.Store.Rollback(ctx, tx) //nolint:errcheck // no-op after commit
	settled, err := w.Store.SettleTx(ctx, tx, job.Args.PaymentID, st)
	if err != nil {
		return err
	}
	if err := client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		if leasehold.IsLeaseLost(err) {
			w.stats.fenced.Add(1)
		}
		return err // rolled back by the deferred Rollback
	}
	if err := w.Store.Commit(ctx, tx); err != nil {
		return fmt.Errorf("record charge of %s: commit: %w", job.Args.PaymentID, err)
	}
	switch {
	case !settled:
		w.stats.alreadySettled.Add(1)
	case st.Status == StatusSucceeded:
		w.stats.charged.Add(1)
	default:
		w.stats.declined.Add(1)
	}
	return nil
}
