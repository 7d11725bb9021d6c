package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
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
	// writeMu is shared with the heartbeater: outcomes take it shared, a
	// renewal exclusively, so a renewal and an outcome never lock rows in
	// opposite orders.
	writeMu  *sync.RWMutex
	maxBatch int
	logger   *slog.Logger

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
}

// finishExecutor is what the completer needs of a driver executor: the
// batched outcome write, and a read of a job whose completion was refused
// (CompleteTx may have written it).
type finishExecutor interface {
	JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error)
	JobGet(ctx context.Context, params *driver.JobGetParams) (*leasetype.JobRow, error)
}

// finishRequest is one lease to end and whom to tell the result.
type finishRequest struct {
	item  *driver.JobFinish
	lease *lease
	done  outcomeWaiter
}

// outcomeWaiter is told the result of a finishRequest: nil on success,
// *LeaseLostError when fenced off. It is called on a flushing goroutine
// and must not block.
type outcomeWaiter interface {
	outcomeWritten(err error)
}

// completerFlushers is how many outcome statements may be in flight at once.
const completerFlushers = 4

func newCompleter(exec finishExecutor, writeMu *sync.RWMutex, maxBatch int, logger *slog.Logger) *completer {
	return &completer{exec: exec, writeMu: writeMu, maxBatch: maxBatch, logger: logger, wake: make(chan struct{}, 1)}
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
			batch := slices.Clone(pending[:n])
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
				c.flush(ctx, batch, release)
				release()
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

// flush writes one batch, retrying database errors until each lease's local
// deadline; past it the lease is lost and the expirer will reclaim the job.
// It calls failed after each failed write.
func (c *completer) flush(ctx context.Context, batch []*finishRequest, failed func()) {
	wait := 20 * time.Millisecond
	for len(batch) > 0 {
		items := make([]*driver.JobFinish, len(batch))
		for i, r := range batch {
			items[i] = r.item
		}
		// Bound the write by the latest local deadline in the batch: past
		// it every lease in the batch is lost anyway.
		callDeadline := time.Now()
		for _, r := range batch {
			deadline, _ := r.lease.times()
			callDeadline = later(callDeadline, deadline)
		}
		callCtx, cancel := context.WithDeadline(context.WithoutCancel(ctx), callDeadline)
		c.writeMu.RLock()
		written, err := c.exec.JobFinish(callCtx, &driver.JobFinishParams{Items: items})
		c.writeMu.RUnlock()
		cancel()
		if err == nil {
			c.report(ctx, batch, written)
			return
		}
		c.logger.Warn("leasehold: write job outcomes", "jobs", len(batch), "error", err)
		failed()
		var keep []*finishRequest
		for _, r := range batch {
			deadline, _ := r.lease.times()
			if time.Now().Before(deadline) {
				keep = append(keep, r)
				continue
			}
			r.done.outcomeWritten(&LeaseLostError{JobID: r.item.ID, Token: r.item.Token, Reason: "could not write the outcome before the local deadline: " + err.Error()})
		}
		batch = keep
		time.Sleep(wait)
		wait = min(wait*2, time.Second)
	}
}

// report hands each request its result. A completion that was refused may
// have been written already by CompleteTx in the handler's own transaction:
// that is success, not a lost lease.
func (c *completer) report(ctx context.Context, batch []*finishRequest, written []int64) {
	ok := make(map[int64]bool, len(written))
	for _, id := range written {
		ok[id] = true
	}
	for _, r := range batch {
		if ok[r.item.ID] {
			r.done.outcomeWritten(nil)
			continue
		}
		if r.item.State == leasetype.JobStateCompleted {
			row, err := c.exec.JobGet(context.WithoutCancel(ctx), &driver.JobGetParams{ID: r.item.ID})
			if err == nil && row.State == leasetype.JobStateCompleted && row.LeaseToken == r.item.Token {
				r.done.outcomeWritten(nil)
				continue
			}
			if err != nil && !errors.Is(err, driver.ErrNotFound) {
				c.logger.Warn("leasehold: check refused completion", "job_id", r.item.ID, "error", err)
			}
		}
		r.done.outcomeWritten(&LeaseLostError{JobID: r.item.ID, Token: r.item.Token, Reason: "outcome refused: the fencing token is no longer current or the lease expired"})
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
