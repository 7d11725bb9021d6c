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

// claimAndStart claims up to limit jobs of p's queue and starts a handler
// goroutine for each.
func (c *clientCore) claimAndStart(ctx context.Context, p *producer, limit int) error {
	// The local lease deadline counts from before the claim was sent: the
	// database computed the lease's expiry at or after this moment.
	sentAt := time.Now()
	var res claimResult
	if p.flow.limited() {
		var err error
		if res, err = c.claimLimited(ctx, p.queue, p.flow, limit); err != nil {
			return err
		}
	} else {
		rows, err := c.exec.JobClaim(ctx, c.claimParams(p.queue, limit))
		if err != nil {
			return err
		}
		res.rows = rows
	}
	rows := res.rows
	p.started(len(rows), len(rows) == limit || res.capped, res.retryIn)
	c.stats.claimed.Add(int64(len(rows)))
	for _, row := range rows {
		entry := c.workers[row.Kind]
		l := newLease(row, c.leaseTTL(row, entry), entry, sentAt)
		c.leases.add(l)
		go c.runJob(p, l)
	}
	return nil
}

// leaseTTL is the effective lease duration of a claimed job; the claim
// statement computed the same on the database.
func (c *clientCore) leaseTTL(row *leasetype.JobRow, entry *workerEntry) time.Duration {
	switch {
	case row.LeaseTTL > 0:
		return row.LeaseTTL
	case entry != nil && entry.opts.LeaseTTL > 0:
		return entry.opts.LeaseTTL
	default:
		return c.cfg.LeaseTTL
	}
}

// runJob runs one attempt and writes its outcome.
func (c *clientCore) runJob(p *producer, l *lease) {
	defer p.jobDone()
	defer c.leases.remove(l)

	if c.stopping.Load() {
		// Claimed but not started when the client began stopping: give the
		// lease back without counting an attempt against the job.
		c.writeOutcome(l, &driver.JobFinish{State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased, Error: "released: client stopping before the job started"})
		return
	}

	ctx, cancel := context.WithCancelCause(c.workCtx)
	defer cancel(nil)
	if !l.setCancel(cancel) {
		return
	}
	if l.entry != nil && l.entry.opts.Timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, l.entry.opts.Timeout)
		defer cancelTimeout()
	}
	ctx = context.WithValue(ctx, coreContextKey{}, c)

	start := time.Now()
	err := c.callHandler(ctx, l)
	l.done.Store(true)
	c.stats.observeDuration(time.Since(start))

	if err != nil && l.cancelRequested.Load() && !l.lost.Load() {
		// Cancelled from outside: the job ends cancelled, whatever error the
		// interrupted handler returned (the database would turn a retry
		// into cancelled anyway). A Permanent error is still a discard.
		var perm *permanentError
		if !errors.As(err, &perm) {
			c.writeOutcome(l, &driver.JobFinish{State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled, Error: "cancelled by request: " + err.Error()})
			return
		}
	}
	if l.lost.Load() && err != nil {
		// The handler most likely failed because its lease was lost: that is
		// an expiry, which the watcher records, not a handler error.
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
	return c.middleware.wrapWork(ctx, l.row, func(ctx context.Context) error { return l.entry.work(ctx, l.row) })
}

// panicError is a recovered handler panic.
type panicError struct {
	value any
	stack string
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v\n\n%s", e.value, e.stack) }

// outcome turns a handler's result into the lease's final write.
func (c *clientCore) outcome(l *lease, err error) *driver.JobFinish {
	row := l.row
	if err == nil {
		return &driver.JobFinish{State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
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
		return &driver.JobFinish{State: leasetype.JobStateScheduled, Outcome: leasetype.OutcomeSnoozed, ScheduledAt: &at}
	case errors.As(err, &cancel):
		return &driver.JobFinish{State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled, Error: err.Error()}
	case errors.As(err, &perm), errors.As(err, &dec):
		return &driver.JobFinish{State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: err.Error(), CountError: true}
	}
	outcome := leasetype.OutcomeFailed
	if errors.As(err, &pan) {
		outcome = leasetype.OutcomePanicked
	}
	item := &driver.JobFinish{Outcome: outcome, Error: err.Error(), CountError: true}
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

// writeOutcome writes the end of the lease through the completer and counts it.
func (c *clientCore) writeOutcome(l *lease, item *driver.JobFinish) {
	item.ID, item.Token = l.row.ID, l.token
	if err := c.completer.finish(l, item); err != nil {
		if IsLeaseLost(err) {
			c.stats.fencedWrites.Add(1)
			if l.lose("outcome refused") {
				c.stats.leasesLost.Add(1)
			}
			c.logger.Warn("leasehold: job outcome not written, lease lost", "job_id", l.row.ID, "token", l.token, "error", err)
		}
		return
	}
	c.stats.countOutcome(item)
	if item.State == leasetype.JobStateAvailable || item.State == leasetype.JobStateScheduled && item.ScheduledAt != nil && !item.ScheduledAt.After(time.Now()) {
		c.wakeQueue(l.row.Queue)
	}
}
