package postgres

import (
	"context"
	"reflect"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// DefaultNotifyWindow is the default of Options.NotifyWindow: per queue, at
// most one insert notification per 2 ms from the inserts a driver commits
// itself.
//
// Postgres commits the transactions that notify one at a time, under a
// server-wide lock held through the commit's WAL flush, so at a thousand
// single inserts a second, each notifying, the inserts queue behind each
// other's flushes (p99 enqueue-to-start 19 ms against 4 ms at p50). One
// notification per queue per 2 ms leaves at most 500 notifying commits a
// second per queue, which do not queue, and delays the wake-up of other
// clients by at most the window (their own inserts wake a client at once).
const DefaultNotifyWindow = 2 * time.Millisecond

// trailingNoticeTimeout bounds the sending of a trailing notification.
const trailingNoticeTimeout = 5 * time.Second

// noticeLimiterSweepAt is the number of queues at which the limiter first
// drops the state of idle ones.
const noticeLimiterSweepAt = 1024

// noticeLimiter coalesces the insert notifications of the inserts the
// driver commits itself (on its pool, outside a caller's transaction): per
// queue, an insert notifies only when the queue's last notification was let
// go at least window ago. An insert held back that commits an available job
// leaves a debt, and the debt is paid by one notification at the end of the
// window: the next insert allowed to notify carries it, or, when none comes
// by then, a trailing notification sent on the pool (send). So no job
// inserted inside a window waits for the listeners' poll, and a notification
// announces only inserts that have committed before it was sent.
//
// Inserts in a caller's transaction do not take part: they commit when the
// caller commits, after any notification the limiter could send for them,
// so each keeps its own notification, which Postgres delivers at that
// commit.
//
// The limiter also says which SenderTracker may be told of a notification
// (the client's recognition of its own inserts, driver.SenderTracker): only
// the one that made every insert the notification announces. A notification
// that also announces someone else's insert is told to no tracker, so that
// every client wakes for it.
type noticeLimiter struct {
	window time.Duration
	// send sends one trailing notification of queue, telling tracker (nil:
	// no one) its sender. It runs on the timer's goroutine.
	send func(ctx context.Context, queue string, tracker driver.SenderTracker)

	mu     sync.Mutex
	queues map[string]*queueNotices
}

// queueNotices is the limiter's state for one queue.
type queueNotices struct {
	last  time.Time // when the queue's latest notification was let go
	debt  noticeDebt
	timer *time.Timer // the pending trailing notification, nil when none
	gen   uint64      // bumped when a notification is let go: older timers are void
}

// noticeDebt are the held-back inserts a notification still owes.
type noticeDebt struct {
	owed bool
	// owner is the tracker every held-back insert was made with, unless
	// mixed: some were made with another one, or with none.
	owner driver.SenderTracker
	mixed bool
}

// add records a held-back insert made with tracker (nil: none).
func (d *noticeDebt) add(tracker driver.SenderTracker) {
	switch {
	case !d.owed:
		d.owed, d.owner, d.mixed = true, tracker, tracker == nil
	case tracker == nil || !sameTracker(tracker, d.owner):
		d.mixed = true
	}
}

// merge adds the held-back inserts of o.
func (d *noticeDebt) merge(o noticeDebt) {
	if !o.owed {
		return
	}
	if !d.owed {
		*d = o
		return
	}
	if o.mixed || !sameTracker(o.owner, d.owner) {
		d.mixed = true
	}
}

// onlyOf reports whether every held-back insert was made with tracker.
func (d noticeDebt) onlyOf(tracker driver.SenderTracker) bool {
	return !d.owed || !d.mixed && sameTracker(d.owner, tracker)
}

// tracker is the tracker to tell of a notification paying d alone.
func (d noticeDebt) tracker() driver.SenderTracker {
	if d.mixed {
		return nil
	}
	return d.owner
}

// sameTracker reports whether a and b are the same tracker; trackers of a
// type that cannot be compared never are.
func sameTracker(a, b driver.SenderTracker) bool {
	if a == nil || b == nil {
		return false
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// noticeTicket is one insert's part in a queue's notifications, from allow
// to done.
type noticeTicket struct {
	lim     *noticeLimiter
	queue   string
	tracker driver.SenderTracker
	// notify: the insert sends the queue's notification (else it is held
	// back). tracked: the tracker may be told of it.
	notify, tracked bool
	// What allow changed, for done to undo when nothing was sent.
	taken          noticeDebt
	prevLast, last time.Time
}

// newNoticeLimiter returns a limiter of window, or nil (every insert
// notifies) when window is not positive.
func newNoticeLimiter(window time.Duration, send func(context.Context, string, driver.SenderTracker)) *noticeLimiter {
	if window <= 0 {
		return nil
	}
	return &noticeLimiter{window: window, send: send, queues: map[string]*queueNotices{}}
}

// allow decides whether an insert about to make jobs of queue available,
// made with tracker (nil: none), notifies. It must be followed by done. On a
// nil limiter every insert notifies.
func (l *noticeLimiter) allow(queue string, tracker driver.SenderTracker) *noticeTicket {
	t := &noticeTicket{lim: l, queue: queue, tracker: tracker, notify: true, tracked: true}
	if l == nil {
		return t
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queues) >= noticeLimiterSweepAt {
		l.sweep(now)
	}
	q := l.queues[queue]
	if q == nil {
		q = &queueNotices{}
		l.queues[queue] = q
	}
	if !q.last.IsZero() && now.Sub(q.last) < l.window {
		t.notify, t.tracked = false, false
		return t
	}
	t.taken, t.prevLast, t.last = q.debt, q.last, now
	t.tracked = q.debt.onlyOf(tracker)
	q.debt, q.last = noticeDebt{}, now
	l.letGo(q)
	return t
}

// done reports the outcome of the insert allow was asked for: committed is
// true when the insert committed an available job of the queue (and so, if
// the ticket notified, its notification went out), uncertain when it failed
// in a way that leaves that unknown (a statement or commit whose outcome was
// not confirmed). A held-back insert that committed, or may have, leaves a
// debt; a notification that did not go out, or may not have, gives back the
// debt it was to pay. Either way the doubt costs at most one notification
// more, never a job left to the poll.
func (t *noticeTicket) done(committed, uncertain bool) {
	l := t.lim
	if l == nil {
		return
	}
	if t.notify && committed && !uncertain || !t.notify && !committed && !uncertain {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[t.queue]
	if q == nil {
		q = &queueNotices{}
		l.queues[t.queue] = q
	}
	if t.notify {
		q.debt.merge(t.taken)
		if q.last.Equal(t.last) {
			q.last = t.prevLast
		}
	} else {
		q.debt.add(t.tracker)
	}
	if q.debt.owed {
		l.schedule(q, t.queue)
	}
}

// letGo voids the pending trailing notification of q, whose debt a
// notification now pays; l.mu is held.
func (l *noticeLimiter) letGo(q *queueNotices) {
	q.gen++
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// schedule arranges a trailing notification of q at the end of its window,
// unless one is pending; l.mu is held.
func (l *noticeLimiter) schedule(q *queueNotices, queue string) {
	if q.timer != nil {
		return
	}
	delay := max(0, time.Until(q.last.Add(l.window)))
	gen := q.gen
	q.timer = time.AfterFunc(delay, func() { l.trail(queue, gen) })
}

// trail sends the trailing notification of queue, unless a notification has
// paid its debt since it was scheduled (gen).
func (l *noticeLimiter) trail(queue string, gen uint64) {
	l.mu.Lock()
	q := l.queues[queue]
	if q == nil || q.gen != gen {
		l.mu.Unlock()
		return
	}
	q.timer = nil
	debt := q.debt
	if !debt.owed {
		l.mu.Unlock()
		return
	}
	q.debt, q.last = noticeDebt{}, time.Now()
	q.gen++
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), trailingNoticeTimeout)
	defer cancel()
	l.send(ctx, queue, debt.tracker())
}

// sweep drops the state of queues with nothing pending whose window has
// passed; l.mu is held.
func (l *noticeLimiter) sweep(now time.Time) {
	for name, q := range l.queues {
		if q.timer == nil && !q.debt.owed && now.Sub(q.last) >= l.window {
			delete(l.queues, name)
		}
	}
}

// noticesOf are the tickets of an insert that makes jobs of several queues
// available in one transaction.
type noticesOf []*noticeTicket

// allowAll asks allow for each queue.
func (l *noticeLimiter) allowAll(queues []string, tracker driver.SenderTracker) noticesOf {
	out := make(noticesOf, len(queues))
	for i, q := range queues {
		out[i] = l.allow(q, tracker)
	}
	return out
}

// notifying returns the queues whose notification the insert sends, and of
// those the ones its tracker may be told of.
func (n noticesOf) notifying() (notify, tracked []string) {
	for _, t := range n {
		if t.notify {
			notify = append(notify, t.queue)
			if t.tracked {
				tracked = append(tracked, t.queue)
			}
		}
	}
	return notify, tracked
}

// done reports the outcome of the transaction that made the tickets' jobs
// available: err is nil when it committed; any error leaves the outcome
// uncertain (it may have come from the commit).
func (n noticesOf) done(err error) {
	for _, t := range n {
		t.done(err == nil, err != nil)
	}
}
