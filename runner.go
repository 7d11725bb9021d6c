package leasehold

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// claimAndStart claims up to limit jobs of p's queue and starts each on one
// of the producer's handler goroutines.
//
// One statement claims them all: a claim scans the claim index from its
// head, past the entries of the jobs claimed before it that vacuum has not
// removed yet, so few large claims cost the database less per job than many
// small ones (splitting each claim into two concurrent statements of half
// the size, tried, cost about a sixth of the drain throughput). The
// producer may overlap two claims instead, when enough workers free up
// while one runs.
// Claims of a queue with fleet-wide limits are one transaction.
func (c *clientCore) claimAndStart(ctx context.Context, p *producer, limit int) error {
	// The local lease deadline counts from before the claim was sent: the
	// database computed the lease's expiry at or after this moment.
	sentAt := time.Now()
	if p.flow.limited() {
		res, err := c.claimLimited(ctx, p.queue, p.flow, limit)
		if err != nil {
			return err
		}
		p.claimed(len(res.rows) == limit || res.capped, res.retryIn)
		c.start(p, res.rows, sentAt)
		return nil
	}
	params := c.claimParams(p.queue, limit)
	params.After = p.claimFrom(sentAt, c.cfg.PollInterval)
	rows, err := c.exec.JobClaim(ctx, params)
	if err != nil {
		p.advance(nil, false)
		return err
	}
	// The backlog flag is set before the jobs start, so that the first of
	// them to end already wakes the loop when the claim was full.
	p.claimed(len(rows) == limit, 0)
	p.advance(rows, len(rows) == limit)
	c.start(p, rows, sentAt)
	return nil
}

// start counts claimed rows as running on p and starts their handlers.
// sentAt is when the claim was sent: the local lease deadline counts from
// there, since the database computed the expiry at or after it.
func (c *clientCore) start(p *producer, rows []*leasetype.JobRow, sentAt time.Time) {
	if len(rows) == 0 {
		return
	}
	p.add(len(rows))
	c.stats.claimed.Add(int64(len(rows)))
	work := c.runJob
	for _, row := range rows {
		entry := c.workers[row.Kind]
		l := newLease(row, c.leaseTTL(row, entry), entry, sentAt)
		l.core, l.producer = c, p
		c.leases.add(l)
		p.handlers.run(l, work)
	}
}

// handlerPool runs a producer's jobs on goroutines that outlive one job.
// A goroutine that finished a job waits for the next one, so a busy queue
// reuses goroutines instead of starting one per job. Each job still gets its
// own context, panic recovery and outcome write (runJob); only the goroutine
// is reused. Waiting goroutines are handed jobs most recently idle first
// (their stacks are the likeliest to still be grown). Those that waited
// longer than handlerIdle are retired, oldest first, when the next job
// arrives, and all of them when the producer closes the pool (the client
// stops); a goroutine waiting in between holds only its stack.
type handlerPool struct {
	mu      sync.Mutex
	idle    []*handlerWorker // waiting goroutines, the most recently idle last
	closed  bool
	live    atomic.Int64 // goroutines of the pool, running or waiting
	maxIdle time.Duration
}

// handlerWorker is one goroutine of the pool.
type handlerWorker struct {
	jobs  chan *lease // capacity 1: handing a job over never blocks; nil retires it
	since time.Time   // when it started waiting
}

// handlerIdle is how long a handler goroutine may wait for a job before
// the pool retires it.
const handlerIdle = 5 * time.Second

func newHandlerPool() *handlerPool { return &handlerPool{maxIdle: handlerIdle} }

// open lets the pool start goroutines again after close (a restarted client).
func (hp *handlerPool) open() {
	hp.mu.Lock()
	hp.closed = false
	hp.mu.Unlock()
}

// close retires the waiting goroutines; the running ones exit when their job
// ends.
func (hp *handlerPool) close() {
	hp.mu.Lock()
	idle := hp.idle
	hp.idle, hp.closed = nil, true
	hp.mu.Unlock()
	for _, w := range idle {
		w.jobs <- nil
	}
}

// run has work(l) called on a waiting goroutine, or on a new one when none
// waits: a job never queues behind another.
func (hp *handlerPool) run(l *lease, work func(*lease)) {
	now := time.Now()
	hp.mu.Lock()
	// Retire the goroutines that waited too long (the oldest are first).
	var retire []*handlerWorker
	for len(hp.idle) > 0 && now.Sub(hp.idle[0].since) > hp.maxIdle {
		retire = append(retire, hp.idle[0])
		hp.idle = hp.idle[1:]
	}
	var w *handlerWorker
	if n := len(hp.idle); n > 0 {
		w = hp.idle[n-1]
		hp.idle = hp.idle[:n-1]
	}
	hp.mu.Unlock()
	for _, r := range retire {
		r.jobs <- nil
	}
	if w != nil {
		w.jobs <- l
		return
	}
	hp.live.Add(1)
	go hp.serve(&handlerWorker{jobs: make(chan *lease, 1)}, l, work)
}

// serve runs l, then the jobs handed to it, until it is retired.
func (hp *handlerPool) serve(w *handlerWorker, l *lease, work func(*lease)) {
	defer hp.live.Add(-1)
	for l != nil {
		work(l)
		hp.mu.Lock()
		if hp.closed {
			hp.mu.Unlock()
			return
		}
		w.since = time.Now()
		hp.idle = append(hp.idle, w)
		hp.mu.Unlock()
		l = w.next()
	}
}

// next waits for the goroutine's next job (nil retires it) with
// stackReserve bytes of its stack in use.
//
// The garbage collector halves the stack of a goroutine that uses less than
// a quarter of it when the collector scans it. A goroutine waiting on a
// channel near the bottom of its stack uses almost none, so every
// collection would shrink the stacks of the waiting handler goroutines to
// the minimum, and each next job would copy its stack again as it grew back
// (twice to reach 8 KiB): on a busy queue of small jobs that copying took a
// quarter of the client's CPU. Waiting below a reserved frame keeps a stack
// of up to 4×stackReserve as it is; larger stacks still shrink.
//
//go:noinline
func (w *handlerWorker) next() *lease {
	var reserve [stackReserve]byte
	l := <-w.jobs
	keepStack(&reserve)
	return l
}

// stackReserve is the stack a waiting handler goroutine keeps in use.
const stackReserve = 2 << 10

// keepStack keeps reserve, and so its stack frame, alive.
//
//go:noinline
func keepStack(reserve *[stackReserve]byte) { _ = reserve }

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
	if l.entry != nil && l.entry.opts.Timeout > 0 {
		var cancelTimeout context.CancelFunc
		ctx, cancelTimeout = context.WithTimeout(ctx, l.entry.opts.Timeout)
		defer cancelTimeout()
	}

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
			c.writeOutcome(l, driver.JobFinish{State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled, Error: "cancelled by request: " + err.Error()})
			return
		}
	}
	if l.lost.Load() && err != nil {
		// The handler most likely failed because its lease was lost: that is
		// an expiry, which the watcher records, not a handler error.
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

// outcomeWritten counts the outcome written, or logs it refused, and ends
// the lease. It runs on a completer goroutine.
func (l *lease) outcomeWritten(err error) {
	c, item := l.core, &l.outcome
	defer l.end()
	if err != nil {
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
	c.events.outcome(l.row, item)
	if item.State == leasetype.JobStateAvailable || item.State == leasetype.JobStateScheduled && item.ScheduledAt != nil && !item.ScheduledAt.After(time.Now()) {
		c.wakeQueue(l.row.Queue)
	}
}

// end releases the lease and frees its job's slot.
func (l *lease) end() {
	l.core.leases.remove(l)
	l.producer.jobDone()
}
