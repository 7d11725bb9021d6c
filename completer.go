package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// completer writes the end of leases in batches: whatever finished while the
// previous batches were being written goes in the next statement, so batches
// grow with load and add no latency when idle. A few batches are written at
// once (completerFlushers): their jobs are disjoint, so they never wait on
// each other's rows. Each write is fenced by the lease's token; the caller
// waits for its result, so a job's slot frees only once its outcome is
// durable.
type completer struct {
	exec driver.Executor
	// writeMu is shared with the heartbeater: outcomes take it shared, a
	// renewal exclusively, so a renewal and an outcome never lock rows in
	// opposite orders.
	writeMu  *sync.RWMutex
	maxBatch int
	logger   *slog.Logger
	requests chan *finishRequest
}

// finishRequest is one lease to end and where to report the result.
type finishRequest struct {
	item   *driver.JobFinish
	lease  *lease
	result chan error // nil on success, *LeaseLostError when fenced off
}

// completerFlushers is how many outcome statements may be in flight at once.
const completerFlushers = 4

func newCompleter(exec driver.Executor, writeMu *sync.RWMutex, maxBatch int, logger *slog.Logger) *completer {
	return &completer{exec: exec, writeMu: writeMu, maxBatch: maxBatch, logger: logger, requests: make(chan *finishRequest, maxBatch)}
}

// finish submits item and waits for it to be written or refused.
func (c *completer) finish(l *lease, item *driver.JobFinish) error {
	req := &finishRequest{item: item, lease: l, result: make(chan error, 1)}
	c.requests <- req
	return receiveDeep(req.result)
}

// run writes batches with completerFlushers writers until ctx ends.
func (c *completer) run(ctx context.Context) {
	var wg sync.WaitGroup
	for range completerFlushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.flushLoop(ctx)
		}()
	}
	wg.Wait()
}

// flushLoop takes whatever requests are waiting, up to maxBatch, writes them
// in one statement, and repeats until ctx ends.
func (c *completer) flushLoop(ctx context.Context) {
	for {
		var first *finishRequest
		select {
		case first = <-c.requests:
		case <-ctx.Done():
			return
		}
		batch := []*finishRequest{first}
	drain:
		for len(batch) < c.maxBatch {
			select {
			case r := <-c.requests:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		c.flush(ctx, batch)
	}
}

// flush writes one batch, retrying database errors until each lease's local
// deadline; past it the lease is lost and the watcher will reclaim the job.
func (c *completer) flush(ctx context.Context, batch []*finishRequest) {
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
		var keep []*finishRequest
		for _, r := range batch {
			deadline, _ := r.lease.times()
			if time.Now().Before(deadline) {
				keep = append(keep, r)
				continue
			}
			r.result <- &LeaseLostError{JobID: r.item.ID, Token: r.item.Token, Reason: "could not write the outcome before the local deadline: " + err.Error()}
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
			r.result <- nil
			continue
		}
		if r.item.State == leasetype.JobStateCompleted {
			row, err := c.exec.JobGet(context.WithoutCancel(ctx), r.item.ID)
			if err == nil && row.State == leasetype.JobStateCompleted && row.LeaseToken == r.item.Token {
				r.result <- nil
				continue
			}
			if err != nil && !errors.Is(err, driver.ErrNotFound) {
				c.logger.Warn("leasehold: check refused completion", "job_id", r.item.ID, "error", err)
			}
		}
		r.result <- &LeaseLostError{JobID: r.item.ID, Token: r.item.Token, Reason: "outcome refused: the fencing token is no longer current or the lease expired"}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
