package leasehold

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// completer writes the end of leases in batches: whatever finished while the
// previous batch was being written goes in the next statement, so batches
// grow with load and add no latency when idle. One batch is written at a
// time, unless a full batch (maxBatch) is waiting: then up to
// completerFlushers are written at once (their jobs are disjoint, so they
// never wait on each other's rows). Few large statements cost the database
// far less per job than many small ones. Each write is fenced by the
// lease's token. The caller is told the result through a callback once the
// write committed or was refused: its job's slot frees only then, so a slot
// frees only once its outcome is durable, while the handler's goroutine is
// already free for the next job.
type completer struct {
	exec finishExecutor
	// owner is the client's lease owner, which every outcome write is
	// fenced by along with the token.
	owner string
	// writeMu is shared with the heartbeater: outcomes take it shared, a
	// renewal exclusively, so a renewal and an outcome never lock rows in
	// opposite orders.
	writeMu  *sync.RWMutex
	maxBatch int
	logger   *slog.Logger
	stats    *statsCounters

	// Submitted requests wait in queued until run takes them. A handler
	// goroutine appends under mu and wakes run only when the queue reaches
	// wakeAt, a length run sets before it waits: 1 when no write is in
	// flight, what completes a full batch while another write may start,
	// never while all completerFlushers are busy (run takes the queue when
	// one ends). A busy completer costs one wake-up per batch, not one per
	// job.
	mu     sync.Mutex
	queued []*finishRequest
	wakeAt int
	wake   chan struct{}    // capacity 1
	spare  []*finishRequest // run's: the buffer queued gets next
	// bufs are the storage of writes that returned, for the next ones
	// (batchBuf); at most as many as writes were ever in flight at once.
	bufs []*flushBuf
}

// flushBuf is the storage of one batch's write: its requests, their items,
// the statement's parameters, the set of the jobs it wrote and the leases
// it ends together (report). A write gets one from the completer
// (batchBuf) and gives it back when it returns (putBatchBuf), so a busy
// completer allocates none of them per batch.
type flushBuf struct {
	batch  []*finishRequest
	items  []*driver.JobFinish
	params driver.JobFinishParams
	ok     map[int64]bool
	ended  []*lease
}

// finishParams returns b's statement parameters for batch: the items of
// its requests, in b's storage.
func (b *flushBuf) finishParams(owner string, batch []*finishRequest) *driver.JobFinishParams {
	b.items = b.items[:0]
	for _, r := range batch {
		b.items = append(b.items, r.item)
	}
	b.params = driver.JobFinishParams{Owner: owner, Items: b.items}
	return &b.params
}

// writtenSet returns b's empty set of written job IDs, for report.
func (b *flushBuf) writtenSet() map[int64]bool {
	if b.ok == nil {
		b.ok = make(map[int64]bool, len(b.batch))
	}
	return b.ok
}

// endLater collects l, whose outcome was written and counted
// (lease.outcomeDone), for endAll.
func (b *flushBuf) endLater(l *lease) { b.ended = append(b.ended, l) }

// endAll ends the leases collected by endLater (endLeases).
func (b *flushBuf) endAll() {
	endLeases(b.ended)
	clear(b.ended)
	b.ended = b.ended[:0]
}

// batchBuf returns storage for a write, holding a copy of batch.
func (c *completer) batchBuf(batch []*finishRequest) *flushBuf {
	c.mu.Lock()
	var b *flushBuf
	if n := len(c.bufs); n > 0 {
		b, c.bufs[n-1] = c.bufs[n-1], nil
		c.bufs = c.bufs[:n-1]
	}
	c.mu.Unlock()
	if b == nil {
		b = new(flushBuf)
	}
	b.batch = append(b.batch[:0], batch...)
	return b
}

// putBatchBuf gives back the storage of a write that returned, holding no
// request any more.
func (c *completer) putBatchBuf(b *flushBuf) {
	clear(b.batch)
	clear(b.items)
	b.params = driver.JobFinishParams{}
	clear(b.ok)
	clear(b.ended)
	b.ended = b.ended[:0]
	c.mu.Lock()
	c.bufs = append(c.bufs, b)
	c.mu.Unlock()
}

// finishExecutor is what the completer needs of a driver executor: the
// batched outcome write, and the batched read of the attempt rows of
// leases whose outcome was refused (CompleteTx, or an earlier try whose
// commit was lost with the connection, may have written it) or is to be
// confirmed (txConfirmer).
type finishExecutor interface {
	JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error)
	JobAttempts(ctx context.Context, params *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error)
}

// finishRequest is one lease to end and whom to tell the result.
type finishRequest struct {
	item  *driver.JobFinish
	lease *lease
	done  outcomeWaiter
	// tried is set once a write of the request failed: it may have
	// committed all the same (the connection was lost during COMMIT), so a
	// refusal that follows is read back before it counts as a lost lease.
	tried bool
}

// outcomeWaiter is told the result of a finishRequest: nil on success,
// *LeaseLostError when fenced off. It is called on a flushing goroutine
// and must not block.
type outcomeWaiter interface {
	outcomeWritten(err error)
}

// completerFlushers is how many outcome statements may be in flight at once.
const completerFlushers = 4

func newCompleter(exec finishExecutor, owner string, writeMu *sync.RWMutex, maxBatch int, logger *slog.Logger, stats *statsCounters) *completer {
	return &completer{exec: exec, owner: owner, writeMu: writeMu, maxBatch: maxBatch, logger: logger, stats: stats, wake: make(chan struct{}, 1)}
}

// finish submits r; r.done is told its result once it is written or
// refused. The completer must be running until every submitted request's
// done has been told. finish never blocks: the requests outstanding are
// bounded by the leases held, each of which submits one.
func (c *completer) finish(r *finishRequest) {
	c.mu.Lock()
	c.queued = append(c.queued, r)
	wake := len(c.queued) == c.wakeAt
	c.mu.Unlock()
	if wake {
		select {
		case c.wake <- struct{}{}:
		default: // a wake-up is already pending; run takes r with it
		}
	}
}

// take appends the submitted requests to pending and empties the queue.
func (c *completer) take(pending []*finishRequest) []*finishRequest {
	c.mu.Lock()
	q := c.queued
	c.queued = c.spare[:0]
	c.mu.Unlock()
	pending = append(pending, q...)
	clear(q)
	c.spare = q
	return pending
}

// arm sets the queue length at which finish wakes run, given the writes in
// flight and the requests run holds, and reports whether the queue is
// already that long (run must not wait then).
func (c *completer) arm(busy, pending int) bool {
	at := math.MaxInt // all flushers busy: run takes the queue when one ends
	switch {
	case busy == 0:
		at = 1
	case busy < completerFlushers:
		at = max(1, c.maxBatch-pending)
	}
	c.mu.Lock()
	c.wakeAt = at
	ready := len(c.queued) >= at
	c.mu.Unlock()
	return ready
}

// run collects requests and starts the batches' writes until ctx ends. It
// waits for the writes in flight before it returns.
//
// A write that fails (the database is away) stops counting as the one in
// flight while it retries, so that other outcomes are not held behind it.
func (c *completer) run(ctx context.Context) {
	// The writes outlive ctx (they end leases whose outcome is due) and
	// only bound themselves by the leases' deadlines.
	detached := context.WithoutCancel(ctx)
	var (
		pending []*finishRequest
		busy    int                   // writes in flight that have not failed
		freed   = make(chan struct{}) // a write ended or failed once
		writes  sync.WaitGroup
	)
	for {
		pending = c.take(pending)
		for len(pending) > 0 && (busy == 0 || len(pending) >= c.maxBatch && busy < completerFlushers) {
			n := min(len(pending), c.maxBatch)
			buf := c.batchBuf(pending[:n])
			clear(pending[:n])
			pending = append(pending[:0], pending[n:]...)
			busy++
			writes.Add(1)
			go func() {
				defer writes.Done()
				released := false
				release := func() {
					if !released {
						released = true
						freed <- struct{}{}
					}
				}
				c.flush(detached, buf, release)
				release()
				c.putBatchBuf(buf)
			}()
		}
		if c.arm(busy, len(pending)) {
			continue
		}
		select {
		case <-c.wake:
		case <-freed:
			busy--
		case <-ctx.Done():
			for ; busy > 0; busy-- {
				<-freed
			}
			writes.Wait()
			return
		}
	}
}

// flush writes one batch, buf.batch, retrying database errors until each
// lease's local deadline; past it the lease is lost and the expirer will
// reclaim the job. It calls failed after each failed write. ctx is never
// cancelled (the writes are bounded by the leases' deadlines): it carries
// the client's values only.
func (c *completer) flush(ctx context.Context, buf *flushBuf, failed func()) {
	batch := buf.batch
	if c.flushAndClaim(ctx, buf, failed) {
		return
	}
	wait := 20 * time.Millisecond
	for len(batch) > 0 {
		params := buf.finishParams(c.owner, batch)
		// Bound the write by the latest local deadline in the batch: past
		// it every lease in the batch is lost anyway.
		callDeadline := time.Now()
		for _, r := range batch {
			deadline, _ := r.lease.times()
			callDeadline = later(callDeadline, deadline)
		}
		callCtx, cancel := context.WithDeadline(ctx, callDeadline)
		c.writeMu.RLock()
		written, err := c.exec.JobFinish(callCtx, params)
		c.writeMu.RUnlock()
		cancel()
		if err == nil {
			c.report(ctx, batch, written, buf)
			return
		}
		c.logger.Warn("leasehold: write job outcomes", "jobs", len(batch), "error", err)
		failed()
		var keep, expired []*finishRequest
		for _, r := range batch {
			r.tried = true
			deadline, _ := r.lease.times()
			if time.Now().Before(deadline) {
				keep = append(keep, r)
				continue
			}
			expired = append(expired, r)
		}
		if len(expired) > 0 {
			// The failed write may have committed: one quick read tells.
			readCtx, cancelRead := context.WithTimeout(ctx, lastReadTimeout)
			landed, _ := c.readBack(readCtx, expired)
			cancelRead()
			for i, r := range expired {
				if landed[i] {
					r.done.outcomeWritten(nil)
					continue
				}
				r.done.outcomeWritten(&LeaseLostError{JobID: r.item.ID, Token: r.item.Token, Reason: "could not write the outcome before the local deadline: " + err.Error()})
			}
		}
		batch = keep
		time.Sleep(wait)
		wait = min(wait*2, time.Second)
	}
}

// flushAndClaim writes batch and, in the same round trip and transaction
// (driver.FinishClaimer), claims jobs for the producer most of the batch's
// leases belong to, when that producer has a backlog: as many as it has
// free workers plus those the batch frees. A drain then costs one round
// trip per batch, not two. The claimed jobs are counted as running before
// the batch is reported, and start after it, so the producer's loop never
// sees the freed workers as free in between.
//
// It reports false when it wrote nothing: no claim to send along (flush
// writes the batch alone) or a failed write, after which every request is
// marked tried and flush retries the batch on its own. ctx is flush's,
// never cancelled.
func (c *completer) flushAndClaim(ctx context.Context, buf *flushBuf, failed func()) bool {
	batch := buf.batch
	fc, ok := c.exec.(driver.FinishClaimer)
	if !ok || len(batch) == 0 || batch[0].tried {
		return false
	}
	p, freeing := claimantOf(batch)
	if p == nil {
		return false
	}
	limit, claimCtx := p.claimAlong(freeing)
	if limit == 0 {
		return false
	}
	defer p.alongDone(limit)
	core := batch[0].lease.core
	params := buf.finishParams(c.owner, batch)
	callDeadline := time.Now()
	for _, r := range batch {
		deadline, _ := r.lease.times()
		callDeadline = later(callDeadline, deadline)
	}
	sentAt := time.Now()
	claim := core.claimParams(p.queue, limit)
	claim.After = p.claimFrom(sentAt, core.cfg.PollInterval)
	callCtx, cancel := context.WithDeadline(ctx, callDeadline)
	// The producer stopping ends the claim, and the outcomes with it: they
	// are retried alone (flush).
	stop := context.AfterFunc(claimCtx, cancel)
	c.writeMu.RLock()
	written, rows, err := fc.JobFinishAndClaim(callCtx, params, claim)
	c.writeMu.RUnlock()
	stop()
	cancel()
	if err != nil {
		p.advance(nil, false)
		if claimCtx.Err() == nil { // else the producer is stopping
			c.logger.Warn("leasehold: write job outcomes and claim jobs", "jobs", len(batch), "queue", p.queue, "error", err)
		}
		failed()
		for _, r := range batch {
			r.tried = true
		}
		return false
	}
	full := len(rows) == limit
	p.claimed(full, 0)
	p.advance(rows, full)
	p.add(len(rows))
	c.report(ctx, batch, written, buf)
	core.startCounted(p, rows, sentAt)
	return true
}

// claimantOf returns the producer that most of batch's leases belong to and
// how many of them belong to it. It returns nil when no lease has a
// producer (a test's), or when a handler called CompleteTx for one of them:
// a refused outcome of such a lease is read back job by job, which would
// hold up the start of the jobs claimed along.
func claimantOf(batch []*finishRequest) (*producer, int) {
	// A batch mostly holds the leases of one producer: those are counted
	// without a map.
	var (
		only  *producer
		n     int
		mixed bool
	)
	for _, r := range batch {
		if r.lease.completing.Load() {
			return nil, 0
		}
		switch p := r.lease.producer; {
		case p == nil:
		case only == nil || p == only:
			only = p
			n++
		default:
			mixed = true
		}
	}
	if !mixed {
		return only, n
	}
	var (
		best  *producer
		most  int
		count = make(map[*producer]int, 2)
	)
	for _, r := range batch {
		if r.lease.completing.Load() {
			return nil, 0
		}
		p := r.lease.producer
		if p == nil {
			continue
		}
		count[p]++
		if count[p] > most {
			best, most = p, count[p]
		}
	}
	return best, most
}

// lastReadTimeout bounds the read-back of an outcome whose writes failed
// until its lease's local deadline.
const lastReadTimeout = time.Second

// report hands each request its result. An outcome that was refused may
// have been written already: by CompleteTx in the handler's own
// transaction, or by an earlier try of this write whose COMMIT was lost
// with its connection. The attempt history tells (readBack), read for all
// such refusals of the batch in one statement; only when it shows no
// outcome of this lease is the refusal a lost lease. ctx is flush's, never
// cancelled. buf is the write's storage (nil: none).
//
// The leases whose outcome was written, told as they come, end together
// before any read-back (endLeases): one lock of the lease set and one
// count of freed slots per batch instead of per job.
func (c *completer) report(ctx context.Context, batch []*finishRequest, written []int64, buf *flushBuf) {
	if buf == nil {
		buf = new(flushBuf)
	}
	ok := buf.writtenSet()
	for _, id := range written {
		ok[id] = true
	}
	var check []*finishRequest
	for _, r := range batch {
		switch {
		case ok[r.item.ID] && r.done == outcomeWaiter(r.lease):
			r.lease.outcomeDone(nil)
			buf.endLater(r.lease)
		case ok[r.item.ID]:
			r.done.outcomeWritten(nil)
		case r.tried || r.item.State == leasetype.JobStateCompleted || r.lease.completing.Load():
			check = append(check, r)
		default:
			r.done.outcomeWritten(refusedError(r))
		}
	}
	buf.endAll()
	if len(check) == 0 {
		return
	}
	landed, err := c.readBack(ctx, check)
	if err != nil {
		c.logger.Warn("leasehold: read back refused outcomes", "jobs", len(check), "error", err)
	}
	for i, r := range check {
		if landed[i] {
			r.done.outcomeWritten(nil)
			continue
		}
		r.done.outcomeWritten(refusedError(r))
	}
}

// refusedError is the error of r's outcome write that the database refused.
func refusedError(r *finishRequest) error {
	return &LeaseLostError{JobID: r.item.ID, Token: r.item.Token, Reason: "outcome refused: the fencing token is no longer current, the lease owner changed or the lease expired"}
}

// readBack reports, for each request, whether its lease already ended with
// an outcome of its own: the job's attempt history has a row of its token
// and this client's owner that the expirer did not write. It reads the
// attempt rows of all of them in one statement per
// driver.MaxAttemptLeases (JobAttemptsParams.Leases). A request found
// written has its item become what was written, so that it is counted and
// reported as what it was; a write that was ambiguous is logged and
// counted as such. On an error, the requests of the statements that failed
// read as not written.
func (c *completer) readBack(ctx context.Context, batch []*finishRequest) ([]bool, error) {
	landed := make([]bool, len(batch))
	var firstErr error
	for start := 0; start < len(batch); start += driver.MaxAttemptLeases {
		chunk := batch[start:min(len(batch), start+driver.MaxAttemptLeases)]
		refs := leaseRefs(chunk)
		attempts, err := c.exec.JobAttempts(ctx, &driver.JobAttemptsParams{Leases: refs})
		if err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		c.landedOf(chunk, refs, attempts, landed[start:])
	}
	return landed, firstErr
}

// leaseRefs names the leases of batch, for JobAttemptsParams.Leases.
func leaseRefs(batch []*finishRequest) []driver.LeaseRef {
	refs := make([]driver.LeaseRef, len(batch))
	for i, r := range batch {
		refs[i] = driver.LeaseRef{ID: r.item.ID, Token: r.item.Token}
	}
	return refs
}

// landedOf sets landed[i] for each request of batch (named by refs) whose
// lease ended with an outcome of this client's among attempts, the attempt
// rows read for refs, and records what was found (readBackFound).
func (c *completer) landedOf(batch []*finishRequest, refs []driver.LeaseRef, attempts []*leasetype.AttemptRow, landed []bool) {
	byLease := make(map[driver.LeaseRef]*leasetype.AttemptRow, len(attempts))
	for _, a := range attempts {
		if a.Owner == c.owner && a.Outcome != leasetype.OutcomeLeaseExpired {
			byLease[driver.LeaseRef{ID: a.JobID, Token: a.Token}] = a
		}
	}
	for i, r := range batch {
		if found := byLease[refs[i]]; found != nil {
			c.readBackFound(r, found)
			landed[i] = true
		}
	}
}

// readBackFound records that r's lease already ended with found, its own
// attempt row: r.item becomes what was written, and an ambiguous write is
// logged and counted.
func (c *completer) readBackFound(r *finishRequest, found *leasetype.AttemptRow) {
	item := r.item
	completedInTx := r.lease.completing.Load() && found.Outcome == leasetype.OutcomeCompleted
	switch {
	case completedInTx && item.State == leasetype.JobStateCompleted:
		// CompleteTx committed and the handler returned nil: the usual
		// path, nothing ambiguous.
		return
	case completedInTx:
		// CompleteTx's transaction committed although the handler reported
		// an error (most likely its COMMIT's, lost with the connection).
		c.logger.Warn("leasehold: completion commit ambiguous: job read back as completed by this token",
			"job_id", item.ID, "token", item.Token, "handler_outcome", string(item.Outcome))
	default:
		c.logger.Warn("leasehold: outcome write ambiguous: job read back as written by this token",
			"job_id", item.ID, "token", item.Token, "outcome", string(found.Outcome))
	}
	c.stats.ambiguousCommits.Add(1)
	switch {
	case found.Outcome == item.Outcome:
	case found.Outcome == leasetype.OutcomeCompleted:
		*item = driver.JobFinish{ID: item.ID, Token: item.Token, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
	case found.Outcome == leasetype.OutcomeCancelled:
		item.State, item.Outcome = leasetype.JobStateCancelled, leasetype.OutcomeCancelled
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
