package leasehold

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// Wake-ups: a producer claims on its poll interval and whenever it is
// woken. It is woken by this client's own inserts (wakeForInserts, right
// after the insert returns), by the database's insert notifications of
// other clients' inserts (listen, notified; a notification of this
// client's own insert is recognised and skipped, ownNotices), and by jobs
// that become claimable again here (wakeQueue: an expired lease reclaimed,
// a job released or snoozed into the past, a periodic slot, an operator's
// retry).

// listen forwards the database's insert notifications to the producers,
// reconnecting after failures, until ctx ends.
func (c *clientCore) listen(ctx context.Context, ready chan struct{}) {
	var once sync.Once
	markReady := func() { once.Do(func() { close(ready) }) }
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := c.notifier.ListenInserts(ctx, func() {
			c.ownNotices.setListening(true)
			markReady()
			wait = 100 * time.Millisecond
		}, c.notified)
		c.ownNotices.setListening(false)
		if ctx.Err() != nil {
			return
		}
		c.logger.Warn("leasehold: insert notifications lost; polling until reconnected", "error", err)
		// Jobs inserted while not listening are found by the next claim.
		for _, p := range c.producers {
			p.wakeupFromHead()
		}
		sleepCtx(ctx, wait)
		wait = min(wait*2, 5*time.Second)
	}
}

// watchNotifications warns, once per silence, when the database's insert
// notifications stop arriving while the listener is listening (checkSilence),
// and counts it in Stats.NotificationsSilent; the producers' polling keeps
// finding the jobs meanwhile. A silence is found within about window, a few
// poll intervals after this client's own insert.
func (c *clientCore) watchNotifications(ctx context.Context) {
	window := max(3*c.cfg.PollInterval, 2*time.Second)
	t := time.NewTicker(window / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			began, ended := c.ownNotices.checkSilence(now, window)
			switch {
			case began:
				c.stats.notificationsSilent.Add(1)
				c.logger.Warn("leasehold: insert notifications are not arriving (is LISTEN going through a connection pooler in transaction mode?); relying on polling every PollInterval",
					"window", window, "poll_interval", c.cfg.PollInterval)
			case ended:
				c.logger.Info("leasehold: insert notifications are arriving again")
			}
		}
	}
}

// notified wakes the producer of the notice's queue, unless the notice is of
// this client's own insert, which woke it already.
func (c *clientCore) notified(n driver.InsertNotice) {
	if c.ownNotices.own(n) {
		return
	}
	if p := c.producers[n.Queue]; p != nil {
		p.wakeupForNotice()
	}
}

// wakeQueue asks the queue's producer, if this client works the queue, to
// claim soon, from the head of the claim order: jobs may have become
// claimable anywhere in it.
func (c *clientCore) wakeQueue(queue string) {
	if p := c.producers[queue]; p != nil {
		p.wakeupFromHead()
	}
}

// wakeForInsert asks the queue's producer, if this client works the queue,
// to claim soon the jobs an insert made available, the first of which in
// claim order is at position at.
func (c *clientCore) wakeForInsert(queue string, at driver.ClaimPosition) {
	if p := c.producers[queue]; p != nil {
		p.wakeupFor(at)
	}
}

// wakeForInserts wakes the producer of each queue for the jobs an insert
// made available there, the first of which in claim order is at the
// queue's position.
func (c *clientCore) wakeForInserts(first map[string]driver.ClaimPosition) {
	for queue, at := range first {
		c.wakeForInsert(queue, at)
	}
}

// keepFirst records at as queue's position in first when it sorts before
// the one recorded.
func keepFirst(first map[string]driver.ClaimPosition, queue string, at driver.ClaimPosition) {
	if cur, ok := first[queue]; !ok || at.Compare(cur) < 0 {
		first[queue] = at
	}
}

// afterEveryCursor is a schedule later than any producer's position.
var afterEveryCursor = time.Unix(1<<40, 0)

// insertPosition is where a job inserted without returning its row sorts in
// claim order, as far as the client can tell: a job without a schedule gets
// the database's current time, which no claim that ended before the insert
// began has passed, so it sorts after every cursor of its priority (a claim
// running meanwhile may pass it: producers return to the head at least once
// per poll interval).
func insertPosition(p *driver.JobInsertParams) driver.ClaimPosition {
	at := driver.ClaimPosition{Priority: p.Priority, ScheduledAt: afterEveryCursor, ID: math.MaxInt64}
	if p.ScheduledAt != nil {
		at.ScheduledAt = *p.ScheduledAt
	}
	return at
}

// tracking returns the SenderTracker for an insert: when the client wakes
// its own producers after it (wake) and hears notifications, the tracker
// through which the driver names the insert's notifications, so that the
// listener does not wake the producers a second time; nil otherwise.
func (c *clientCore) tracking(wake bool) driver.SenderTracker {
	if !wake || c.ownNotices == nil || len(c.producers) == 0 {
		return nil
	}
	return c.ownNotices
}

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
// skips exactly one notification per expected (sender, queue). A driver
// that coalesces notifications (Postgres: at most one per queue per
// postgres.Options.NotifyWindow) names only those that go out, and only
// those that announce this client's inserts alone, so an expectation always
// has a notification coming, and a notification announcing another
// client's job as well wakes the producer. A
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
//
// The expectations also tell when notifications stop arriving altogether
// while the listener believes it is listening, as behind a connection
// pooler in transaction mode, which drops notifications it cannot route
// (checkSilence).
type ownNotices struct {
	works func(queue string) bool // whether the client works the queue

	mu        sync.Mutex
	listening bool
	pending   map[noticeKey]pendingNotices
	heard     time.Time // when the listener last delivered any notification
	silentAt  time.Time // when a silence was found; zero when none is on
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
	since   time.Time // when the count last rose from zero
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
	p, ok := o.pending[k]
	if !ok {
		p.since = now
	}
	o.pending[k] = pendingNotices{count: p.count + 1, since: p.since, expires: now.Add(noticeExpiry)}
}

// Unsent withdraws one Sending of sender for queue.
func (o *ownNotices) Unsent(sender int64, queue string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.take(noticeKey{sender, queue}, time.Now())
}

// own reports whether n was expected, and if so consumes the expectation.
func (o *ownNotices) own(n driver.InsertNotice) bool {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.heard = now
	if n.Sender == 0 {
		return false
	}
	return o.take(noticeKey{n.Sender, n.Queue}, now)
}

// checkSilence looks for a silent listener: one that is listening, has an
// expectation older than window, and has delivered no notification at all
// since that expectation was made. Another notification arriving means
// notifications flow, even when this client's own are not recognised (a
// pooler that reports its own process IDs). It reports a silence when one
// begins, and its end when a notification arrives after it.
func (o *ownNotices) checkSilence(now time.Time, window time.Duration) (began, ended bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.silentAt.IsZero() {
		if o.heard.After(o.silentAt) || !o.listening {
			o.silentAt = time.Time{}
			return false, true
		}
		return false, false
	}
	if !o.listening {
		return false, false
	}
	for _, p := range o.pending {
		if now.Sub(p.since) >= window && !o.heard.After(p.since) {
			o.silentAt = now
			return true, false
		}
	}
	return false, false
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
	if on {
		o.heard = time.Time{}
	}
}
