package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// txConfirmer confirms the completions that CompleteTx wrote in a
// handler's own transaction, for handlers that then returned nil.
//
// Such a job needs no outcome write of the client: the completion is in
// the handler's transaction, which committed (the usual case) or rolled
// back. Its worker slot therefore frees as soon as the handler returns,
// and the lease ends once the commit is known: read back from the attempt
// history, the attempt rows of many leases in one statement
// (driver.JobAttemptsParams.Leases), off the slots' path. Only then is the
// completion counted (Stats.Completed) and its event sent.
//
// One read is in flight at a time. The confirmations wait for one another
// (the read is a transaction of its own, and the point is that it be
// shared): a read starts once confirmBatch of them wait, once the oldest
// has waited confirmMaxDelay, or at once when no other job of the client
// is running (nothing more would come soon: an idle client confirms
// without delay). Under load a read thus confirms at least confirmBatch
// jobs, or as many as end in confirmMaxDelay: a fraction of a transaction
// per job however slow the reads, for at most confirmMaxDelay more before
// a job is counted and its event sent.
//
// A completion that is not in the attempt history did not commit: the
// transaction rolled back although the handler returned nil. The lease is
// still this client's (the completion never landed), so its outcome is
// written as a handler error (errCompleteTxNotCommitted) through the
// completer: the job is retried under its retry policy, with the business
// writes that rolled back with it. Were the transaction still open, that
// write waits on the row it locked; should it commit after all, the write
// is refused and read back as an ambiguous commit.
type txConfirmer struct {
	completer *completer // whose executor, owner and read-back are used
	logger    *slog.Logger
	// notCommitted writes the outcome of a lease whose CompleteTx did not
	// commit.
	notCommitted func(*lease)
	// running counts the client's leases (nil: none besides the
	// confirmations): when every one is a confirmation waiting, the read
	// starts at once.
	running  func() int
	batch    int
	maxDelay time.Duration

	mu      sync.Mutex
	queued  []*finishRequest
	firstAt time.Time     // when the oldest of queued was submitted
	wake    chan struct{} // capacity 1
}

// confirmBatch and confirmMaxDelay pace a txConfirmer's reads (see there).
const (
	confirmBatch    = 64
	confirmMaxDelay = 50 * time.Millisecond
)

// errCompleteTxNotCommitted is the outcome of a job whose handler returned
// nil after CompleteTx while the completion did not commit.
var errCompleteTxNotCommitted = errors.New("leasehold: the handler returned nil after CompleteTx, but its transaction did not commit (rolled back): the job is retried")

func newTxConfirmer(c *completer, logger *slog.Logger, running func() int, notCommitted func(*lease)) *txConfirmer {
	return &txConfirmer{completer: c, logger: logger, running: running, notCommitted: notCommitted,
		batch: min(confirmBatch, c.maxBatch), maxDelay: confirmMaxDelay, wake: make(chan struct{}, 1)}
}

// confirm submits r, the completion of a lease that CompleteTx wrote, to be
// confirmed; r.done is told nil once it is read back committed. The
// confirmer must be running until then. It never blocks.
func (cf *txConfirmer) confirm(r *finishRequest) {
	cf.mu.Lock()
	if len(cf.queued) == 0 {
		cf.firstAt = time.Now()
	}
	cf.queued = append(cf.queued, r)
	cf.mu.Unlock()
	select {
	case cf.wake <- struct{}{}:
	default:
	}
}

// take empties the queue and returns what it held.
func (cf *txConfirmer) take() []*finishRequest {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	q := cf.queued
	cf.queued = nil
	return q
}

// due returns how long the queue may still wait before a read, zero when a
// read is due now; extra are requests run holds (failed reads to retry).
func (cf *txConfirmer) due(extra int) (time.Duration, bool) {
	cf.mu.Lock()
	n, firstAt := len(cf.queued), cf.firstAt
	cf.mu.Unlock()
	if n == 0 {
		return 0, false
	}
	wait := cf.maxDelay - time.Since(firstAt)
	if n+extra >= cf.batch || wait <= 0 || cf.running == nil || cf.running() <= n+extra {
		return 0, true
	}
	return wait, true
}

// run confirms what is submitted until ctx ends. The client ends it only
// once every lease ended, so nothing submitted is left behind.
func (cf *txConfirmer) run(ctx context.Context) {
	var pending []*finishRequest // failed reads to retry
	retry := 20 * time.Millisecond
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait, queued := cf.due(len(pending))
		switch {
		case !queued && len(pending) == 0:
			select {
			case <-cf.wake:
				continue
			case <-ctx.Done():
				return
			}
		case queued && wait > 0:
			timer.Reset(wait)
			select {
			case <-cf.wake:
			case <-timer.C:
			case <-ctx.Done():
				return
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			continue
		}
		pending = append(pending, cf.take()...)
		var failed []*finishRequest
		for len(pending) > 0 {
			n := min(len(pending), maxConfirmBatch)
			failed = append(failed, cf.check(ctx, pending[:n])...)
			pending = pending[n:]
		}
		pending = failed
		if len(pending) > 0 {
			sleepCtx(ctx, retry)
			retry = min(retry*2, time.Second)
			continue
		}
		retry = 20 * time.Millisecond
	}
}

// maxConfirmBatch is the most leases one confirming read names.
const maxConfirmBatch = 1000

// check reads back batch and settles each request: confirmed, not
// committed, or, when the read failed, returned to be read again (until the
// lease's local deadline and the bound of its transaction have passed,
// after which the lease is given up as lost: the job is completed if the
// transaction committed, and reclaimed by the expirer if not).
func (cf *txConfirmer) check(ctx context.Context, batch []*finishRequest) (again []*finishRequest) {
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lastReadTimeout)
	landed, err := cf.completer.readBack(readCtx, batch)
	cancel()
	if err != nil {
		cf.logger.Warn("leasehold: confirm CompleteTx commits", "jobs", len(batch), "error", err)
		now := time.Now()
		for _, r := range batch {
			deadline, _ := r.lease.times()
			if now.Before(later(deadline, r.lease.completingUntil())) {
				again = append(again, r)
				continue
			}
			cf.giveUp(r.lease, err)
		}
		return again
	}
	cf.settle(batch, landed)
	return nil
}

// settle ends each request of batch as its read found it: confirmed when
// landed, else not committed.
func (cf *txConfirmer) settle(batch []*finishRequest, landed []bool) {
	for i, r := range batch {
		if landed[i] {
			r.done.outcomeWritten(nil)
			continue
		}
		cf.notCommitted(r.lease)
	}
}

// takeAlong removes up to n queued confirmations for a claim to read along
// (driver.AttemptsClaimer): their read then costs no transaction of its
// own. The claim settles them (settle), or gives them back.
func (cf *txConfirmer) takeAlong(n int) []*finishRequest {
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if len(cf.queued) == 0 {
		return nil
	}
	n = min(n, len(cf.queued))
	taken := make([]*finishRequest, n)
	copy(taken, cf.queued)
	cf.queued = append(cf.queued[:0], cf.queued[n:]...)
	return taken
}

// giveBack queues again the confirmations a claim took but could not read,
// due at once.
func (cf *txConfirmer) giveBack(rs []*finishRequest) {
	cf.mu.Lock()
	cf.queued = append(cf.queued, rs...)
	cf.firstAt = time.Now().Add(-cf.maxDelay)
	cf.mu.Unlock()
	select {
	case cf.wake <- struct{}{}:
	default:
	}
}

// giveUp ends a lease whose CompleteTx commit could not be confirmed before
// its lease ran out.
func (cf *txConfirmer) giveUp(l *lease, err error) {
	cf.logger.Warn("leasehold: CompleteTx commit not confirmed before the lease ran out; the job is completed if it committed, else reclaimed when its lease expires",
		"job_id", l.row.ID, "token", l.token, "error", err)
	l.lose("the CompleteTx commit could not be confirmed before the lease ran out")
	l.end()
}
