package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/cron"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/leasetype"
)

// ReconcileArgs are the arguments of a reconciliation job. One is enqueued
// per time slot (EnqueueReconcile); the slot is also its unique key.
type ReconcileArgs struct {
	// Slot is the time slot the job was enqueued for (Unix time divided by
	// the reconciliation interval).
	Slot int64 `json:"slot"`
}

// Kind implements leasehold.JobArgs.
func (ReconcileArgs) Kind() string { return ReconcileKind }

// InsertOpts puts reconciliation jobs in their own queue.
func (ReconcileArgs) InsertOpts() leasehold.InsertOpts {
	return leasehold.InsertOpts{Queue: ReconcileQueue, MaxAttempts: 3}
}

// ReconcilePeriodicJob is the reconciliation as a periodic job: add it to
// the Config.PeriodicJobs of every worker client, and the fleet's periodic
// leader enqueues one reconciliation per slot of length every, with the
// slot stored in the database so a restart never skips one.
func ReconcilePeriodicJob(every time.Duration) *leasehold.PeriodicJob {
	return &leasehold.PeriodicJob{
		Name:     ReconcileKind,
		Schedule: cron.Every(every),
		Job: func(slot time.Time) (leasehold.JobArgs, *leasehold.InsertOpts) {
			return ReconcileArgs{Slot: slot.UnixNano() / int64(every)}, nil
		},
		// One run covers any number of missed slots: it looks at everything pending.
		MissedRuns: leasehold.CatchUpOnce,
	}
}

// EnqueueReconcile enqueues the reconciliation job of the time slot that
// contains now, for slots of length every. Calling it from many processes,
// or many times in a slot, enqueues one job: the slot is the unique key.
// It serves processes that do not run the periodic leader (the chaos
// harness's inserter); worker clients use ReconcilePeriodicJob.
func EnqueueReconcile[TTx any](ctx context.Context, client *leasehold.Client[TTx], every time.Duration, now time.Time) (*leasehold.InsertResult, error) {
	if every <= 0 {
		return nil, fmt.Errorf("payments: reconcile interval %s is not positive", every)
	}
	slot := now.UnixNano() / int64(every)
	return client.Insert(ctx, ReconcileArgs{Slot: slot}, &leasehold.InsertOpts{
		UniqueKey: ReconcileKind + ":" + strconv.FormatInt(int64(every/time.Millisecond), 10) + "ms:" + strconv.FormatInt(slot, 10),
	})
}

// RunReconcileTicker enqueues a reconciliation job every interval until ctx
// ends. Errors are logged and retried at the next tick.
func RunReconcileTicker[TTx any](ctx context.Context, client *leasehold.Client[TTx], every time.Duration, logger *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if _, err := EnqueueReconcile(ctx, client, every, time.Now()); err != nil && ctx.Err() == nil && logger != nil {
			logger.Warn("payments: enqueue reconciliation", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reconciler settles what the charge workers could not: charge jobs left
// stuck by a worker that crashed or paused past its lease, and payments
// pending longer than PendingAfter. For each it asks the PSP for the truth
// by the payment's idempotency key:
//
//   - charged: the payment is marked succeeded; a stuck job is resolved
//     succeeded.
//   - declined: the payment is marked failed; a stuck job is resolved failed.
//   - never seen: a stuck job is resolved retry (charging again is safe: the
//     key is the same); a payment whose job has given up is marked failed.
//   - authorized, not captured: a stuck job is resolved retry, and its next
//     attempt resumes at the stage it recorded and captures; a payment whose
//     job has given up is marked failed (no money moved).
//   - still processing, or the PSP unreachable: left for the next run.
//
// The reason for each resolution is written as the job's last error. Every
// write is conditional, so concurrent reconcilers and late workers are safe.
type Reconciler[TTx any] struct {
	// Store is the payments table.
	Store *Store[TTx]
	// PSP is the provider to ask.
	PSP *psp.Client
	// PendingAfter is the age after which a pending payment is checked even
	// though its job is not stuck; zero means 1 minute.
	PendingAfter time.Duration
	// Limit bounds the stuck jobs and the pending payments handled per run;
	// zero means 500.
	Limit int
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger

	stats reconcileCounters
}

type reconcileCounters struct {
	runs, resolvedSucceeded, resolvedFailed, resolvedRetry, settledPayments, deferred, errors atomic.Int64
}

// ReconcileStats are a Reconciler's counters.
type ReconcileStats struct {
	// Runs counts reconciliation passes.
	Runs int64
	// ResolvedSucceeded, ResolvedFailed and ResolvedRetry count stuck charge
	// jobs resolved each way.
	ResolvedSucceeded, ResolvedFailed, ResolvedRetry int64
	// SettledPayments counts payments the reconciler settled itself.
	SettledPayments int64
	// Deferred counts items left for a later run (PSP still processing).
	Deferred int64
	// Errors counts items that failed (PSP or database unreachable).
	Errors int64
}

// Resolved is the number of stuck jobs resolved, all ways.
func (s ReconcileStats) Resolved() int64 {
	return s.ResolvedSucceeded + s.ResolvedFailed + s.ResolvedRetry
}

// Stats returns the reconciler's counters.
func (r *Reconciler[TTx]) Stats() ReconcileStats {
	s := &r.stats
	return ReconcileStats{
		Runs: s.runs.Load(), ResolvedSucceeded: s.resolvedSucceeded.Load(), ResolvedFailed: s.resolvedFailed.Load(),
		ResolvedRetry: s.resolvedRetry.Load(), SettledPayments: s.settledPayments.Load(), Deferred: s.deferred.Load(),
		Errors: s.errors.Load(),
	}
}

// Opts returns the reconciliation job's worker options. Reconciling twice is
// harmless, so an expired lease simply retries.
func (r *Reconciler[TTx]) Opts() *leasehold.WorkerOpts {
	return &leasehold.WorkerOpts{ExpiryPolicy: leasetype.ExpiryRetry, Retry: leasehold.ExponentialBackoff{Base: time.Second, Max: 10 * time.Second}}
}

// Work runs one reconciliation pass as a leased job.
func (r *Reconciler[TTx]) Work(ctx context.Context, job *leasehold.Job[ReconcileArgs]) error {
	client, err := leasehold.ClientFromContext[TTx](ctx)
	if err != nil {
		return err
	}
	return r.Reconcile(ctx, client)
}

// Reconcile runs one pass: the stuck charge jobs, then the payments pending
// too long. It returns an error only when it could not list its work.
func (r *Reconciler[TTx]) Reconcile(ctx context.Context, client *leasehold.Client[TTx]) error {
	r.stats.runs.Add(1)
	limit := r.Limit
	if limit <= 0 {
		limit = 500
	}
	stuck, err := client.JobList(ctx, &leasehold.JobListParams{States: []leasetype.JobState{leasetype.JobStateStuck}, Kind: ChargeKind, Limit: limit})
	if err != nil {
		return fmt.Errorf("reconcile: list stuck charges: %w", err)
	}
	for _, job := range stuck {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err := r.settleStuck(ctx, client, job); err != nil {
			r.stats.errors.Add(1)
			r.warn("reconcile stuck charge", "job_id", job.ID, "error", err)
		}
	}
	after := r.PendingAfter
	if after <= 0 {
		after = time.Minute
	}
	pending, err := r.Store.ListPending(ctx, r.Store.now().Add(-after), limit)
	if err != nil {
		return fmt.Errorf("reconcile: list pending payments: %w", err)
	}
	for _, p := range pending {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err := r.settlePending(ctx, client, p); err != nil {
			r.stats.errors.Add(1)
			r.warn("reconcile pending payment", "payment_id", p.ID, "error", err)
		}
	}
	return nil
}

func (r *Reconciler[TTx]) warn(msg string, args ...any) {
	if r.Logger != nil {
		r.Logger.Warn("payments: "+msg, args...)
	}
}

// settleStuck settles one stuck charge job.
func (r *Reconciler[TTx]) settleStuck(ctx context.Context, client *leasehold.Client[TTx], job *leasetype.JobRow) error {
	var args ChargeArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
		_, err := client.ResolveStuck(ctx, job.ID, leasehold.ResolveFailed, "reconciliation: undecodable charge args: "+err.Error())
		return err
	}
	p, err := r.Store.Get(ctx, args.PaymentID)
	if errors.Is(err, ErrPaymentNotFound) {
		return r.resolve(ctx, client, job.ID, leasehold.ResolveFailed, "reconciliation: payment "+args.PaymentID+" does not exist")
	}
	if err != nil {
		return err
	}
	if p.Status != StatusPending {
		// Settled earlier (by this reconciler before it could resolve the
		// job, for instance): the job follows the payment.
		as := leasehold.ResolveSucceeded
		if p.Status == StatusFailed {
			as = leasehold.ResolveFailed
		}
		return r.resolve(ctx, client, job.ID, as, fmt.Sprintf("reconciliation: payment %s already %s", p.ID, p.Status))
	}
	charge, err := r.PSP.Lookup(ctx, p.IdempotencyKey)
	switch {
	case errors.Is(err, psp.ErrNotFound):
		return r.resolve(ctx, client, job.ID, leasehold.ResolveRetry,
			fmt.Sprintf("reconciliation: PSP has no charge for key %s (the worker stopped before reaching it); charging again is safe", p.IdempotencyKey))
	case err != nil:
		return err
	}
	switch charge.Status {
	case psp.StatusSucceeded, psp.StatusDeclined:
		st, as := r.settlement(charge, job.LeaseToken)
		if _, err := r.Store.Settle(ctx, p.ID, st); err != nil {
			return err
		}
		r.stats.settledPayments.Add(1)
		return r.resolve(ctx, client, job.ID, as, fmt.Sprintf("reconciliation: PSP %s %s for key %s; payment %s marked %s",
			charge.ID, charge.Status, p.IdempotencyKey, p.ID, st.Status))
	case psp.StatusAuthorized:
		// Authorized, never captured: no money moved. The retry resumes
		// after the last stage the job recorded (the authorization, when
		// it got that far) and captures once, with the payment's keys.
		return r.resolve(ctx, client, job.ID, leasehold.ResolveRetry,
			fmt.Sprintf("reconciliation: PSP %s authorized for key %s, not captured (job stage %q); the retry resumes at its recorded stage", charge.ID, p.IdempotencyKey, job.Stage))
	default:
		r.stats.deferred.Add(1)
		return nil // the PSP is still processing it: next run
	}
}

// settlePending settles a payment pending too long whose job is neither
// stuck nor running: waiting for a retry after transient errors, or given up.
func (r *Reconciler[TTx]) settlePending(ctx context.Context, client *leasehold.Client[TTx], p *Payment) error {
	job, err := client.JobGet(ctx, p.ChargeJobID)
	if err != nil && !errors.Is(err, leasehold.ErrNotFound) {
		return err
	}
	if job != nil && (job.State == leasetype.JobStateStuck || job.State == leasetype.JobStateRunning) {
		// A stuck job is the stuck pass's; a running one belongs to the
		// worker holding its lease, which records the answer itself (or,
		// if it dies, leaves the job stuck).
		return nil
	}
	charge, err := r.PSP.Lookup(ctx, p.IdempotencyKey)
	switch {
	case errors.Is(err, psp.ErrNotFound):
		if job != nil && !job.State.Finalized() {
			r.stats.deferred.Add(1)
			return nil // its job will still try
		}
		reason := "reconciliation: the charge job gave up and the PSP never received the charge"
		if job != nil && job.LastError != "" {
			reason += ": " + job.LastError
		}
		ok, err := r.Store.Settle(ctx, p.ID, Settlement{Status: StatusFailed, FailureReason: reason, SettledBy: SettledByReconciler})
		if ok {
			r.stats.settledPayments.Add(1)
		}
		return err
	case err != nil:
		return err
	}
	if charge.Status == psp.StatusAuthorized && job != nil && job.State.Finalized() {
		// Authorized, and the job gave up before capturing: no money
		// moved, and nothing will capture it (the hold lapses at the PSP).
		ok, err := r.Store.Settle(ctx, p.ID, Settlement{Status: StatusFailed, PSPChargeID: charge.ID,
			FailureReason: "reconciliation: the charge job gave up after authorizing; never captured", SettledBy: SettledByReconciler, Token: job.LeaseToken})
		if ok {
			r.stats.settledPayments.Add(1)
		}
		return err
	}
	if charge.Status != psp.StatusSucceeded && charge.Status != psp.StatusDeclined {
		r.stats.deferred.Add(1)
		return nil // still processing, or authorized with a job that will capture
	}
	var token int64
	if job != nil {
		token = job.LeaseToken
	}
	st, _ := r.settlement(charge, token)
	// Conditional on pending: a worker recording the same answer at the same
	// moment writes it once, whichever is first.
	ok, err := r.Store.Settle(ctx, p.ID, st)
	if ok {
		r.stats.settledPayments.Add(1)
	}
	return err
}

func (r *Reconciler[TTx]) settlement(charge *psp.Charge, token int64) (Settlement, leasehold.Resolution) {
	if charge.Status == psp.StatusSucceeded {
		return Settlement{Status: StatusSucceeded, PSPChargeID: charge.ID, SettledBy: SettledByReconciler, Token: token}, leasehold.ResolveSucceeded
	}
	return Settlement{Status: StatusFailed, PSPChargeID: charge.ID, FailureReason: "declined: " + charge.DeclineCode,
		SettledBy: SettledByReconciler, Token: token}, leasehold.ResolveFailed
}

// resolve resolves a stuck job and counts it. A job another reconciler
// resolved first is not an error.
func (r *Reconciler[TTx]) resolve(ctx context.Context, client *leasehold.Client[TTx], id int64, as leasehold.Resolution, note string) error {
	_, err := client.ResolveStuck(ctx, id, as, note)
	if errors.Is(err, leasehold.ErrJobState) {
		return nil
	}
	if err != nil {
		return err
	}
	switch as {
	case leasehold.ResolveSucceeded:
		r.stats.resolvedSucceeded.Add(1)
	case leasehold.ResolveFailed:
		r.stats.resolvedFailed.Add(1)
	default:
		r.stats.resolvedRetry.Add(1)
	}
	return nil
}

// AddWorkers registers the charge worker and the reconciler on ws with
// their options (AddPayoutWorkers registers the payout graph's).
func AddWorkers[TTx any](ws *leasehold.Workers, charge *ChargeWorker[TTx], rec *Reconciler[TTx]) error {
	if err := leasehold.AddWorkerSafely[ChargeArgs](ws, charge, charge.Opts()); err != nil {
		return err
	}
	return leasehold.AddWorkerSafely[ReconcileArgs](ws, rec, rec.Opts())
}
