package leasehold

import (
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// ownNotices recognises the insert notifications of the client's own
// inserts. After an insert outside a transaction the client wakes the
// producer of the job's queue itself; the database's notification of the
// same insert reaches the client's listener a moment later and, without
// this, starts a second claim that finds nothing (at a steady trickle of
// single inserts, every other claim).
//
// The driver names the database session that will send an insert's
// notification before the insert commits (driver.SenderTracker), and
// notifications carry their sender (driver.InsertNotice), so the listener
// skips exactly one notification per expected (sender, queue). A
// notification of any other insert on the same session — by another client
// sharing the driver, or in a transaction of the application's — finds no
// expectation and wakes the producer as before: expectations are kept per
// client, recorded only for queues the client works, and consumed one each.
//
// An expectation whose notification never comes must not swallow a later
// one, so expectations exist only while the listener is listening: they are
// cleared when it (re)starts and when it fails, since notifications sent in
// between are lost. They also lapse after noticeExpiry, which bounds the
// harm of a sender identity that never matches (a connection pooler that
// reports its own process IDs): such notifications are then simply not
// skipped.
type ownNotices struct {
	works func(queue string) bool // whether the client works the queue

	mu        sync.Mutex
	listening bool
	pending   map[noticeKey]pendingNotices
}

// noticeExpiry is how long an expected notification stays expected.
const noticeExpiry = 10 * time.Second

// noticeSweepAt is the number of expectations at which Sending first drops
// the lapsed ones.
const noticeSweepAt = 1024

type noticeKey struct {
	sender int64
	queue  string
}

type pendingNotices struct {
	count   int
	expires time.Time
}

var _ driver.SenderTracker = (*ownNotices)(nil)

func newOwnNotices(works func(queue string) bool) *ownNotices {
	return &ownNotices{works: works, pending: map[noticeKey]pendingNotices{}}
}

// Sending records that sender's commit will notify queue.
func (o *ownNotices) Sending(sender int64, queue string) {
	if sender == 0 || !o.works(queue) {
		return
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.listening {
		return
	}
	if len(o.pending) >= noticeSweepAt {
		o.sweep(now)
	}
	k := noticeKey{sender, queue}
	p := o.pending[k]
	o.pending[k] = pendingNotices{count: p.count + 1, expires: now.Add(noticeExpiry)}
}

// Unsent withdraws one Sending of sender for queue.
func (o *ownNotices) Unsent(sender int64, queue string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.take(noticeKey{sender, queue}, time.Now())
}

// own reports whether n was expected, and if so consumes the expectation.
func (o *ownNotices) own(n driver.InsertNotice) bool {
	if n.Sender == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.take(noticeKey{n.Sender, n.Queue}, time.Now())
}

// take consumes one live expectation for k; o.mu is held.
func (o *ownNotices) take(k noticeKey, now time.Time) bool {
	p, ok := o.pending[k]
	if !ok {
		return false
	}
	if !now.Before(p.expires) {
		delete(o.pending, k)
		return false
	}
	if p.count <= 1 {
		delete(o.pending, k)
	} else {
		p.count--
		o.pending[k] = p
	}
	return true
}

// sweep drops lapsed expectations; o.mu is held.
func (o *ownNotices) sweep(now time.Time) {
	for k, p := range o.pending {
		if !now.Before(p.expires) {
			delete(o.pending, k)
		}
	}
}

// setListening clears every expectation and says whether the listener is
// listening: true once it is ready, false when it has failed or stopped.
func (o *ownNotices) setListening(on bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.listening = on
	clear(o.pending)
}
