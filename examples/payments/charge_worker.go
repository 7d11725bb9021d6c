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
	// BeforeCharge runs after the payment is loaded, before the attempt's
	// first PSP call (on an attempt that resumes after the authorization,
	// before the capture).
	BeforeCharge func(ctx context.Context, job *leasehold.Job[ChargeArgs])
	// AfterAuthorize runs after the authorize stage is checkpointed, before
	// the capture: between two stages. It is not called for a decline, nor
	// on an attempt that resumes after the authorization.
	AfterAuthorize func(ctx context.Context, job *leasehold.Job[ChargeArgs], auth *psp.Charge)
	// AfterCharge runs once the PSP's final answer is known (the capture
	// checkpointed, or the decline), before the outcome is recorded.
	AfterCharge func(ctx context.Context, job *leasehold.Job[ChargeArgs], charge *psp.Charge)
}

// The charge's stages, in order. Each is checkpointed on the job when it
// succeeds (leasehold.Stages); the last step, recording the outcome on the
// payment with its ledger entry, commits with the job's completion.
const (
	// StageAuthorize: the PSP authorized (or declined) the amount.
	StageAuthorize = "authorize"
	// StageCapture: the PSP captured the authorized amount.
	StageCapture = "capture"
)

// ChargeState is what a charge carries from stage to stage, checkpointed
// with each: an attempt that resumes reads it back instead of asking the
// PSP again.
type ChargeState struct {
	// ChargeID is the PSP's charge, from the authorization.
	ChargeID string `json:"charge_id"`
	// Declined and DeclineCode record a declined authorization.
	Declined    bool   `json:"declined,omitempty"`
	DeclineCode string `json:"decline_code,omitempty"`
	// Captured is set by the capture stage.
	Captured bool `json:"captured,omitempty"`
}

// CaptureIdempotencyKey returns the PSP idempotency key of a payment's
// capture; ChargeIdempotencyKey is its authorization's.
func CaptureIdempotencyKey(paymentID string) string {
	return ChargeIdempotencyKey(paymentID) + "/capture"
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
	// CallDeadline, when positive, bounds how long after its start (its
	// lease's grant, JobRow.LeasedAt) an attempt may still call the PSP: a
	// call is never sent later, and its request is cut off at the deadline.
	// An attempt past it ends with a retryable error, and its retry is a new
	// start the charge queue's KeyRateLimit counts. MerchantKeyRateLimit
	// relies on it: configure both with the same value.
	CallDeadline time.Duration
	// Hooks inject faults; nil for none.
	Hooks *Hooks

	stats chargeCounters
}

type chargeCounters struct {
	charged, declined, transient, rejected, fenced, alreadySettled atomic.Int64
	resumed, skipped, authorizeCalls, captureCalls, late           atomic.Int64
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
	// Fenced counts checkpoints and completions refused because the lease
	// was lost: nothing was written (a completion's transaction, payment
	// write included, was rolled back).
	Fenced int64
	// ResumedAttempts counts attempts that resumed after a stage an earlier
	// attempt recorded, skipping it; StagesSkipped the stages they skipped.
	ResumedAttempts, StagesSkipped int64
	// AuthorizeCalls and CaptureCalls count the PSP calls of each stage,
	// retries after transient errors included.
	AuthorizeCalls, CaptureCalls int64
	// AlreadySettled counts jobs whose payment was settled elsewhere first.
	AlreadySettled int64
	// LateAttempts counts attempts that reached a PSP call after their
	// CallDeadline and retried instead of calling.
	LateAttempts int64
}

// Stats returns the worker's counters.
func (w *ChargeWorker[TTx]) Stats() ChargeStats {
	s := &w.stats
	return ChargeStats{
		Charged: s.charged.Load(), Declined: s.declined.Load(), TransientErrors: s.transient.Load(),
		Rejected: s.rejected.Load(), Fenced: s.fenced.Load(), AlreadySettled: s.alreadySettled.Load(),
		ResumedAttempts: s.resumed.Load(), StagesSkipped: s.skipped.Load(),
		AuthorizeCalls: s.authorizeCalls.Load(), CaptureCalls: s.captureCalls.Load(), LateAttempts: s.late.Load(),
	}
}

// Opts returns the worker options a charge needs: expiry policy stuck (a
// charge whose worker vanished may have reached the PSP and is never re-run
// blindly), the customer's sequence (SequenceBy customer_id, policy
// continue: see below), and the worker's retry policy, attempts and lease.
//
// A customer's charges and refunds share the sequence, so they run one at
// a time in insert order across the fleet: one charge per customer at a
// time, and a refund only after its payment's charge (inserted before it)
// finished. A stuck charge — its outcome at the PSP unknown — holds every
// later job of the customer until the Reconciler settles it (the library
// blocks a sequence behind a stuck job under either policy). A charge
// discarded (refused by the PSP as invalid, or out of attempts) lets the
// customer's later jobs go on (SequenceContinue): it no longer calls the
// PSP, its payment is the Reconciler's, and its outcome does not concern
// the customer's other payments; a refund behind it waits for that
// outcome itself (RefundWorker). SequenceBlock would hold the customer's
// payments until an operator retried or deleted the discarded job, though
// the Reconciler settles its payment without one.
//
// The job's flow key is the merchant (InsertOpts.Key at creation), whose
// PSP requests the charge queue's KeyRateLimit bounds: ChargeQueueConfig.
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
		// A customer's jobs one at a time, in insert order, fleet-wide.
		SequenceBy: []string{"customer_id"}, SequencePolicy: leasehold.SequenceContinue}
}

// Work charges one payment in stages: authorize at the PSP, capture, then
// record the outcome with its ledger entry and complete the job in one
// fenced transaction. An attempt after a crash or an error resumes after
// the last stage recorded and never runs it again; each stage's PSP call
// carries a key derived from the payment, so a call repeated because its
// answer was lost (before its checkpoint) is answered, not made twice.
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
	stages, err := leasehold.NewStages[ChargeState](job.JobRow, StageAuthorize, StageCapture)
	if err != nil {
		return leasehold.Permanent(err)
	}
	defer func() {
		// A resumed attempt is one that skipped a stage it found recorded.
		if n := stages.Skipped(); n > 0 {
			w.stats.resumed.Add(1)
			w.stats.skipped.Add(int64(n))
		}
	}()
	if w.Hooks != nil && w.Hooks.BeforeCharge != nil {
		w.Hooks.BeforeCharge(ctx, job)
	}
	// A worker whose lease is lost must not make outside effects: another
	// worker, or the reconciler, now owns the payment.
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var answer *psp.Charge // the PSP's last answer in this attempt
	err = stages.Do(ctx, StageAuthorize, func(ctx context.Context, st *ChargeState) error {
		callCtx, cancel, err := w.callContext(ctx, job)
		if err != nil {
			return err
		}
		defer cancel()
		w.stats.authorizeCalls.Add(1)
		auth, err := w.PSP.Authorize(callCtx, p.IdempotencyKey, psp.ChargeRequest{Amount: p.AmountCents, Currency: p.Currency, Reference: p.ID,
			Customer: job.Args.CustomerID, Merchant: p.MerchantID})
		if err != nil {
			return w.pspError(p, job, "authorize", err)
		}
		switch auth.Status {
		case psp.StatusAuthorized, psp.StatusSucceeded:
			// Succeeded: captured already (by a capture whose checkpoint
			// was lost with its attempt); the capture stage replays it.
		case psp.StatusDeclined:
			st.Declined, st.DeclineCode = true, auth.DeclineCode
		default:
			w.stats.transient.Add(1)
			return fmt.Errorf("authorize payment %s: PSP answered %s", p.ID, auth.Status)
		}
		st.ChargeID, answer = auth.ID, auth
		return nil
	})
	if err != nil {
		return w.stageError(err)
	}
	if !stages.State.Declined && answer != nil && w.Hooks != nil && w.Hooks.AfterAuthorize != nil {
		w.Hooks.AfterAuthorize(ctx, job, answer)
	}
	if stages.State.Declined {
		// A decline is the PSP's final answer: nothing to capture.
		if answer == nil {
			answer = &psp.Charge{ID: stages.State.ChargeID, Status: psp.StatusDeclined, DeclineCode: stages.State.DeclineCode}
		}
	} else {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		err = stages.Do(ctx, StageCapture, func(ctx context.Context, st *ChargeState) error {
			callCtx, cancel, err := w.callContext(ctx, job)
			if err != nil {
				return err
			}
			defer cancel()
			w.stats.captureCalls.Add(1)
			ch, err := w.PSP.Capture(callCtx, CaptureIdempotencyKey(p.ID), st.ChargeID)
			if err != nil {
				return w.pspError(p, job, "capture", err)
			}
			if ch.Status != psp.StatusSucceeded {
				w.stats.transient.Add(1)
				return fmt.Errorf("capture payment %s: PSP answered %s", p.ID, ch.Status)
			}
			st.Captured, answer = true, ch
			return nil
		})
		if err != nil {
			return w.stageError(err)
		}
		if answer == nil || answer.Status != psp.StatusSucceeded {
			// Resumed after the capture: its checkpoint holds the answer.
			answer = &psp.Charge{ID: stages.State.ChargeID, Status: psp.StatusSucceeded}
		}
	}
	if w.Hooks != nil && w.Hooks.AfterCharge != nil {
		w.Hooks.AfterCharge(ctx, job, answer)
	}
	return w.record(ctx, job, answer)
}

// callContext returns the context of one PSP call, cut off at the
// attempt's CallDeadline, or a retryable error when it has passed.
func (w *ChargeWorker[TTx]) callContext(ctx context.Context, job *leasehold.Job[ChargeArgs]) (context.Context, context.CancelFunc, error) {
	ctx, cancel, err := callContext(ctx, job.JobRow, w.CallDeadline)
	if err != nil {
		w.stats.late.Add(1)
	}
	return ctx, cancel, err
}

// pspError classifies a failed PSP call of a stage.
func (w *ChargeWorker[TTx]) pspError(p *Payment, job *leasehold.Job[ChargeArgs], stage string, err error) error {
	if psp.IsRetryable(err) {
		// The outcome is unknown (timeout, lost response) or the PSP is
		// unavailable: retry with backoff and jitter. The next attempt
		// resumes at this stage and sends the same key, so the PSP answers
		// with the original result instead of acting again.
		w.stats.transient.Add(1)
		return fmt.Errorf("%s payment %s (attempt %d): %w", stage, p.ID, job.Attempt, err)
	}
	// The PSP refused the request itself: retrying cannot help. The
	// payment stays pending; the reconciler settles it from the PSP's
	// answer once the job has given up.
	w.stats.rejected.Add(1)
	return leasehold.Permanent(fmt.Errorf("%s payment %s: %w", stage, p.ID, err))
}

// stageError counts a refused checkpoint as fenced.
func (w *ChargeWorker[TTx]) stageError(err error) error {
	if leasehold.IsLeaseLost(err) {
		w.stats.fenced.Add(1)
	}
	return err
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
