package leasehold

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// heartbeater renews every lease the client holds with one batched statement
// per tick, and cancels the handlers of leases that are refused or whose
// local deadline passes without a successful renewal.
type heartbeater struct {
	exec    renewExecutor
	owner   string // the client's lease owner: renewals are fenced by it and the token
	leases  *leaseSet
	writeMu *sync.RWMutex // held exclusively: outcomes, which hold it shared, never interleave their row locks with a renewal's
	logger  *slog.Logger
	stats   *statsCounters
	observe func(leases int, rtt time.Duration, err error)
}

// renewExecutor is what the heartbeater needs of a driver executor.
type renewExecutor interface {
	JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error)
}

// minHeartbeatWait bounds how often the loop wakes, whatever the TTLs.
const minHeartbeatWait = 10 * time.Millisecond

func (h *heartbeater) run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.enforceDeadlines(ctx)
	}()
	defer func() { <-done }()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var buf []*lease
	for {
		var next time.Time
		next, buf = h.tick(ctx, buf)
		wait := max(time.Until(next), minHeartbeatWait)
		h.leases.planTick(time.Now().Add(wait))
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-h.leases.added:
		case <-timer.C:
		}
	}
}

// enforceDeadlines cancels the handlers of leases whose local deadline
// passed without a successful renewal. It runs apart from the renewal loop
// so that a renewal stuck on an unresponsive database cannot delay it.
func (h *heartbeater) enforceDeadlines(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	var held []*lease
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		now := time.Now()
		wait := 50 * time.Millisecond
		held = h.leases.snapshot(held)
		for _, l := range held {
			if l.done.Load() || l.lost.Load() {
				continue
			}
			if l.completing.Load() {
				// The CompleteTx transaction holds the row; where the
				// driver bounds it (driver.TxBounder) the database aborts
				// it at the bound. Once the bound and the local margin
				// have passed, the lease has run out unless it committed:
				// cancel a handler still stalled there. database/sql rolls
				// back a transaction begun with the handler's context
				// when it is cancelled, which bounds it where the
				// database does not.
				stalled := l.completingUntil().Add(l.ttl / 10)
				if now.Before(stalled) {
					wait = min(wait, stalled.Sub(now))
					continue
				}
				if l.lose("the CompleteTx transaction was not committed within the lease (the database aborts it)") {
					h.logger.Warn("leasehold: lease lost, CompleteTx transaction not committed in time", "job_id", l.row.ID, "token", l.token)
				}
				continue
			}
			deadline, _ := l.times()
			if now.Before(deadline) {
				wait = min(wait, deadline.Sub(now), l.ttl/10)
				continue
			}
			if l.lose("no successful renewal before the local deadline (database unreachable or slow)") {
				h.logger.Warn("leasehold: lease lost at local deadline", "job_id", l.row.ID, "token", l.token)
			}
		}
		clear(held) // hold no ended lease until the next look
		timer.Reset(max(wait, time.Millisecond))
	}
}

// tick renews the leases that are due and returns when it next needs to
// run. held is storage for the snapshot of the leases, returned for reuse.
func (h *heartbeater) tick(ctx context.Context, held []*lease) (time.Time, []*lease) {
	held = h.leases.startTick(held)
	defer clear(held) // hold no ended lease until the next tick
	now := time.Now()
	next := now.Add(time.Second)
	var due []*lease
	// A renewal that has not returned by the earliest local deadline among
	// its leases is useless: those leases are lost by then.
	callDeadline := now.Add(time.Hour)
	for _, l := range held {
		if l.done.Load() || l.completing.Load() || l.lost.Load() {
			continue
		}
		deadline, renewDue := l.times()
		if !now.Before(deadline) {
			continue // enforceDeadlines loses it
		}
		// A lease within a sixth of its TTL of being due rides along with
		// the ones that are due, so leases claimed at different moments
		// share statements instead of each sending its own.
		if !now.Before(renewDue.Add(-l.ttl / 6)) {
			due = append(due, l)
			renewDue = now.Add(l.ttl / 3)
			callDeadline = earliest(callDeadline, deadline)
		}
		next = earliest(next, renewDue)
	}
	if len(due) == 0 {
		return next, held
	}
	params := &driver.JobHeartbeatParams{Owner: h.owner, Leases: make([]driver.LeaseRenewal, len(due))}
	for i, l := range due {
		params.Leases[i] = driver.LeaseRenewal{ID: l.row.ID, Token: l.token, TTL: l.ttl}
	}
	callCtx, cancel := context.WithDeadline(ctx, callDeadline)
	defer cancel()
	h.writeMu.Lock()
	sentAt := time.Now()
	renewed, err := h.exec.JobHeartbeat(callCtx, params)
	rtt := time.Since(sentAt)
	h.writeMu.Unlock()
	h.stats.heartbeats.Add(1)
	if h.observe != nil {
		h.observe(len(params.Leases), rtt, err)
	}
	if err != nil {
		if ctx.Err() == nil {
			h.logger.Warn("leasehold: renew leases", "leases", len(due), "error", err)
		}
		// Retry soon; the local deadlines still hold.
		return earliest(next, time.Now().Add(h.retryDelay(due))), held
	}
	ok := make(map[int64]bool, len(renewed))
	for _, id := range renewed {
		ok[id] = true
	}
	for _, l := range due {
		if ok[l.row.ID] {
			l.renewed(sentAt)
			continue
		}
		// A lease that finished in the meantime is not lost.
		if l.done.Load() || l.completing.Load() {
			continue
		}
		if l.lose("renewal refused: the fencing token is no longer current, the lease owner changed or the lease expired") {
			h.stats.fencedWrites.Add(1)
			h.logger.Warn("leasehold: lease lost, renewal refused", "job_id", l.row.ID, "token", l.token)
		}
	}
	return next, held
}

// retryDelay is the wait before retrying a failed renewal: a tenth of the
// shortest TTL, so several tries fit before any local deadline.
func (h *heartbeater) retryDelay(due []*lease) time.Duration {
	d := time.Second
	for _, l := range due {
		d = min(d, l.ttl/10)
	}
	return d
}

func earliest(t time.Time, others ...time.Time) time.Time {
	for _, o := range others {
		if o.Before(t) {
			t = o
		}
	}
	return t
}
