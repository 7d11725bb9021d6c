package leasehold

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// runJob runs one attempt and submits its outcome. The job's slot and
// lease are released (l.end) once the outcome is written or refused, or at
// once when nothing is to be written; the goroutine is free when runJob
// returns.
func (c *clientCore) runJob(l *lease) {
	if c.stopping.Load() {
		// Claimed but not started when the client began stopping: give the
		// lease back without counting an attempt against the job.
		c.writeOutcome(l, driver.JobFinish{State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased, Error: "released: client stopping before the job started"})
		return
	}

	ctx, cancel := context.WithCancelCause(c.handlerBase)
	defer cancel(nil)
	if !l.setCancel(cancel) {
		l.end()
		return
	}
	// interruptHandlers cancels the handlers whose leases hold a cancel
	// function when it looks; one set after that sees the flag here.
	if c.interrupted.Load() {
		cancel(ErrClientStopping)
	}
	l.hctx = leaseContext{Context: ctx, lease: l}
	ctx = &l.hctx
	if l.entry != nil && l.entry.opts.Timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, l.entry.opts.Timeout)
		defer cancelTimeout()
	}

	start := time.Now()
	err := c.callHandler(ctx, l)
	l.done.Store(true)
	took := time.Since(start)
	c.stats.observeDuration(took)
	if l.producer != nil {
		l.producer.observeJob(took)
	}

	if err != nil && l.cancelRequested.Load() && !l.lost.Load() {
		// Cancelled from outside: the job ends cancelled, whatever error the
		// interrupted handler returned (the database would turn a retry
		// into cancelled anyway). A Permanent error is still a discard.
		var perm *permanentError
		if !errors.As(err, &perm) {
			c.writeOutcome(l, driver.JobFinish{State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled, Error: "cancelled by request: " + err.Error()})
			return
		}
	}
	if l.superseded.Load() {
		// The job's current lease is another of this client's, with the
		// same token: a write of this one would pass as that one's.
		l.end()
		return
	}
	if err == nil && l.completedTx.Load() {
		// CompleteTx wrote the completion in the handler's transaction:
		// nothing is left to write, only its commit to confirm (even when
		// the lease is known lost: the row lock may have kept it).
		c.confirmCompleteTx(l)
		return
	}
	if l.lost.Load() && err != nil {
		// The handler most likely failed because its lease was lost: that is
		// an expiry, which the expirer records, not a handler error.
		l.end()
		return
	}
	// A completion is offered to the database even when the lease is known
	// lost: the fenced write is the authority and refuses it unless this
	// lease is still current.
	c.writeOutcome(l, c.outcome(l, err))
}

// callHandler runs the worker, turning a panic into an error with its stack.
func (c *clientCore) callHandler(ctx context.Context, l *lease) (err error) {
	if l.entry == nil {
		return fmt.Errorf("%w: %q", ErrUnknownKind, l.row.Kind)
	}
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{value: r, stack: string(debug.Stack())}
		}
	}()
	if err := c.fillBatchOutcome(ctx, l.row); err != nil {
		return err
	}
	if len(c.middleware.work) == 0 {
		return l.entry.work(ctx, l.row)
	}
	return c.middleware.wrapWork(ctx, l.row, func(ctx context.Context) error { return l.entry.work(ctx, l.row) })
}

// panicError is a recovered handler panic.
type panicError struct {
	value any
	stack string
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n\n%s", e.value, e.stack) }

// outcome turns a handler's result into the lease's final write.
func (c *clientCore) outcome(l *lease, err error) driver.JobFinish {
	row := l.row
	if err == nil {
		return driver.JobFinish{State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
	}
	var (
		snooze *snoozeError
		cancel *cancelError
		perm   *permanentError
		dec    *errDecode
		pan    *panicError
	)
	switch {
	case errors.As(err, &snooze):
		at := time.Now().Add(snooze.d)
		return driver.JobFinish{State: leasetype.JobStateScheduled, Outcome: leasetype.OutcomeSnoozed, ScheduledAt: &at}
	case errors.As(err, &cancel):
		return driver.JobFinish{State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled, Error: err.Error()}
	case errors.As(err, &perm), errors.As(err, &dec):
		return driver.JobFinish{State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: err.Error(), CountError: true}
	}
	outcome := leasetype.OutcomeFailed
	if errors.As(err, &pan) {
		outcome = leasetype.OutcomePanicked
	}
	item := driver.JobFinish{Outcome: outcome, Error: err.Error(), CountError: true}
	errorsNow := row.Errors + 1
	if errorsNow >= row.MaxAttempts {
		item.State = leasetype.JobStateDiscarded
		return item
	}
	policy := c.cfg.Retry
	if l.entry != nil && l.entry.opts.Retry != nil {
		policy = l.entry.opts.Retry
	}
	at := time.Now().Add(policy.NextRetry(errorsNow))
	item.State, item.ScheduledAt = leasetype.JobStateRetryable, &at
	return item
}

// writeOutcome submits the end of the lease to the completer; once it is
// written (and counted) or refused, the lease ends (outcomeWritten).
func (c *clientCore) writeOutcome(l *lease, item driver.JobFinish) {
	l.outcome = item
	l.outcome.ID, l.outcome.Token = l.row.ID, l.token
	l.request = finishRequest{item: &l.outcome, lease: l, done: l}
	c.completer.finish(&l.request)
}

// confirmCompleteTx frees the slot of a lease whose handler returned nil
// after CompleteTx and has the txConfirmer confirm its commit; the lease
// ends, counted completed, once it is confirmed (see txConfirmer).
func (c *clientCore) confirmCompleteTx(l *lease) {
	l.outcome = driver.JobFinish{ID: l.row.ID, Token: l.token, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
	l.request = finishRequest{item: &l.outcome, lease: l, done: l}
	l.freeSlot()
	c.confirmer.confirm(&l.request)
}

// completeTxNotCommitted writes the outcome of a lease whose handler
// returned nil after CompleteTx although the transaction did not commit: a
// handler error, so the job is retried under its retry policy.
func (c *clientCore) completeTxNotCommitted(l *lease) {
	c.logger.Warn("leasehold: CompleteTx transaction did not commit although the handler returned nil; the job will be retried",
		"job_id", l.row.ID, "token", l.token)
	c.writeOutcome(l, c.outcome(l, errCompleteTxNotCommitted))
}
