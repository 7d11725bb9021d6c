package leasehold

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// EventKind is the kind of an Event.
type EventKind string

// Event kinds. Each is about something this client did or saw; none reports
// what other clients do with their own jobs.
const (
	// EventKindJobCompleted: a job this client ran was completed, by its
	// handler returning nil or by CompleteTx in the handler's transaction.
	EventKindJobCompleted EventKind = "job_completed"
	// EventKindJobFailed: a handler failed (error or panic) and the job will
	// be retried at Job.ScheduledAt.
	EventKindJobFailed EventKind = "job_failed"
	// EventKindJobDiscarded: a job was discarded: its handler returned a
	// Permanent error, failed for the MaxAttempts-th time, or its
	// arguments could not be decoded.
	EventKindJobDiscarded EventKind = "job_discarded"
	// EventKindJobCancelled: a job ended cancelled, by its handler (Cancel)
	// or because JobCancel was called while it ran.
	EventKindJobCancelled EventKind = "job_cancelled"
	// EventKindJobSnoozed: a handler snoozed its job (Snooze) until
	// Job.ScheduledAt.
	EventKindJobSnoozed EventKind = "job_snoozed"
	// EventKindLeaseLost: this client lost a lease it held: a renewal or an
	// outcome was refused by the fencing check, the database could not be
	// reached before the lease's local deadline, or CompleteTx was refused.
	// Event.Err is a *LeaseLostError like the one the handler's context is
	// cancelled with. Nothing this lease writes afterwards lands. It is
	// sent once per lease, when Stats.LeasesLost counts it.
	EventKindLeaseLost EventKind = "lease_lost"
	// EventKindJobExpired: this client's expirer reclaimed a job whose
	// lease expired on the database clock. The lease may have been any
	// client's, this one's included.
	EventKindJobExpired EventKind = "job_expired"
)

// kindBit is k's bit in a kind mask, 0 for an unknown kind. It is on the
// path of every outcome, so it allocates nothing.
func kindBit(k EventKind) uint32 {
	switch k {
	case EventKindJobCompleted:
		return 1 << 0
	case EventKindJobFailed:
		return 1 << 1
	case EventKindJobDiscarded:
		return 1 << 2
	case EventKindJobCancelled:
		return 1 << 3
	case EventKindJobSnoozed:
		return 1 << 4
	case EventKindLeaseLost:
		return 1 << 5
	case EventKindJobExpired:
		return 1 << 6
	}
	return 0
}

// Event is something that happened to a job on this client, sent to the
// subscriptions of its Kind (Subscribe).
//
// Every subscription receives the same *Event: treat it, and its Job, as
// read-only.
type Event struct {
	// Kind says what happened.
	Kind EventKind

	// Job is the job as this client knows it after the event.
	//
	// For the outcome kinds (completed, failed, discarded, cancelled,
	// snoozed) it is a copy of the row as claimed for the attempt that
	// ended, with what the outcome wrote applied: State; Errors, one more
	// for a failure; LastError, the handler's error text for a failure,
	// discard or cancellation (unchanged otherwise); and ScheduledAt, for
	// a retry or a snooze. Attempt and LeaseToken are those of the attempt
	// that ended. The columns the database sets on its own clock
	// (FinalizedAt, LeaseUntil, HeartbeatAt, Heartbeats) are left as they
	// were at the claim. When JobCancel was called on the job after its
	// handler returned but before the outcome was written, the database
	// stores a retry or a snooze as cancelled while the event still says
	// failed or snoozed; JobGet reads the stored row.
	//
	// For EventKindLeaseLost it is a copy of the row as claimed (State
	// running): the client does not know what became of the job since.
	//
	// For EventKindJobExpired it is the row as the expirer's reclaim left
	// it (State available, stuck or cancelled; Expiries counted), read
	// back from the database.
	Job *leasetype.JobRow

	// Err is the *LeaseLostError for EventKindLeaseLost; nil for the other
	// kinds, whose error text is in Job.LastError.
	Err error

	// Time is when the client learned of the event, on the local clock.
	Time time.Time
}

// SubscribeConfig configures a subscription (SubscribeConfig).
type SubscribeConfig struct {
	// Kinds are the kinds of events the subscription receives; at least
	// one. There is no "every kind": a subscriber names the kinds it
	// handles, so a kind added in a later version reaches only those that
	// ask for it.
	Kinds []EventKind
	// ChanSize is the capacity of the subscription's channel; default
	// 1000. An event that finds the channel full is dropped.
	ChanSize int
}

// defaultEventChanSize is SubscribeConfig.ChanSize's default.
const defaultEventChanSize = 1000

// Subscribe returns a channel that receives this client's events of the
// given kinds, and a function that ends the subscription; the channel's
// capacity is 1000 (SubscribeConfig sets another).
//
// An event is sent once what it reports is durable: an outcome once its
// write committed (for CompleteTx, once the handler returned and the
// completion in its transaction is confirmed committed: CompleteTx
// returning is not enough, since the transaction may still roll back),
// an expiry once the reclaim committed. A write the database refused
// sends no outcome event but an EventKindLeaseLost. A lease given back
// unworked (the client stopping before the handler started) sends none.
//
// Delivery is best effort. The job path never waits for a subscriber: an
// event that finds a subscription's channel full is dropped for that
// subscription and counted in Stats.EventsDropped. Receive promptly, and
// hand slow work to another goroutine. Events from different jobs may
// arrive in any order; order one job's events by Job.Attempt.
//
// Only this client's events are sent: outcomes of the jobs it ran, the
// leases it lost, the expiries its expirer reclaimed. It is not a feed of
// the whole fleet: read other clients' jobs with JobGet or JobList.
//
// A subscription may start before Start and lasts across Stop and a later
// Start: outcomes written while Stop drains the running jobs are sent
// before Stop returns, and none follows until the client starts again.
// The function that ends it closes the channel, after which no event is
// sent on it; it may be called more than once and at any time, also
// while events are being sent.
//
// It returns an error wrapping ErrInvalidArgs when no kind or an unknown
// one is given.
func (c *Client[TTx]) Subscribe(kinds ...EventKind) (<-chan *Event, func(), error) {
	return c.SubscribeConfig(&SubscribeConfig{Kinds: kinds})
}

// SubscribeConfig is Subscribe with a configured channel size. It returns
// an error wrapping ErrInvalidArgs when cfg names no kind or an unknown
// one, or has a negative ChanSize.
func (c *Client[TTx]) SubscribeConfig(cfg *SubscribeConfig) (<-chan *Event, func(), error) {
	if cfg == nil || len(cfg.Kinds) == 0 {
		return nil, nil, fmt.Errorf("%w: subscribe: no event kind given", ErrInvalidArgs)
	}
	var mask uint32
	for _, k := range cfg.Kinds {
		bit := kindBit(k)
		if bit == 0 {
			return nil, nil, fmt.Errorf("%w: subscribe: unknown event kind %q", ErrInvalidArgs, k)
		}
		mask |= bit
	}
	size := cfg.ChanSize
	switch {
	case size < 0:
		return nil, nil, fmt.Errorf("%w: subscribe: ChanSize %d is negative", ErrInvalidArgs, size)
	case size == 0:
		size = defaultEventChanSize
	}
	ch, cancel := c.core.events.subscribe(mask, size)
	return ch, cancel, nil
}

// eventHub fans a client's events out to its subscriptions. Sending holds
// mu shared and never blocks; ending a subscription holds it exclusively to
// close the channel, so no send lands on a closed channel.
type eventHub struct {
	mu   sync.RWMutex
	subs []*subscription
	// wanted is the union of the subscriptions' kinds: the job path reads
	// it alone, and builds no event nobody asked for.
	wanted  atomic.Uint32
	dropped *atomic.Int64 // Stats.EventsDropped
}

// subscription is one subscriber's channel and the kinds it receives.
type subscription struct {
	ch    chan *Event
	kinds uint32
}

func newEventHub(dropped *atomic.Int64) *eventHub { return &eventHub{dropped: dropped} }

func (h *eventHub) subscribe(kinds uint32, size int) (<-chan *Event, func()) {
	s := &subscription{ch: make(chan *Event, size), kinds: kinds}
	h.mu.Lock()
	h.subs = append(h.subs, s)
	h.wanted.Store(h.wanted.Load() | kinds)
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() { once.Do(func() { h.unsubscribe(s) }) }
}

func (h *eventHub) unsubscribe(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var wanted uint32
	kept := h.subs[:0]
	for _, o := range h.subs {
		if o != s {
			kept = append(kept, o)
			wanted |= o.kinds
		}
	}
	clear(h.subs[len(kept):])
	h.subs = kept
	h.wanted.Store(wanted)
	close(s.ch)
}

// wants reports whether a subscription receives kind k.
func (h *eventHub) wants(k EventKind) bool {
	return h != nil && h.wanted.Load()&kindBit(k) != 0
}

// send offers e to every subscription of its kind, dropping it for those
// whose channel is full.
func (h *eventHub) send(e *Event) {
	bit := kindBit(e.Kind)
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.subs {
		if s.kinds&bit == 0 {
			continue
		}
		select {
		case s.ch <- e:
		default:
			h.dropped.Add(1)
		}
	}
}

// outcome sends the event of an outcome written for the claimed row.
func (h *eventHub) outcome(row *leasetype.JobRow, item *driver.JobFinish) {
	kind := outcomeKind(item)
	if kind == "" || !h.wants(kind) {
		return
	}
	job := *row
	job.State = item.State
	if item.CountError {
		job.Errors++
	}
	if item.Error != "" {
		job.LastError = item.Error
	}
	if item.ScheduledAt != nil {
		job.ScheduledAt = *item.ScheduledAt
	}
	h.send(&Event{Kind: kind, Job: &job, Time: time.Now()})
}

// outcomeKind is the event kind of an outcome, "" for a release.
func outcomeKind(item *driver.JobFinish) EventKind {
	switch item.State {
	case leasetype.JobStateCompleted:
		return EventKindJobCompleted
	case leasetype.JobStateRetryable:
		return EventKindJobFailed
	case leasetype.JobStateDiscarded:
		return EventKindJobDiscarded
	case leasetype.JobStateCancelled:
		return EventKindJobCancelled
	case leasetype.JobStateScheduled:
		if item.Outcome == leasetype.OutcomeSnoozed {
			return EventKindJobSnoozed
		}
	}
	return ""
}

// leaseLost sends the event of a lease this client lost.
func (h *eventHub) leaseLost(row *leasetype.JobRow, err *LeaseLostError) {
	if !h.wants(EventKindLeaseLost) {
		return
	}
	job := *row
	h.send(&Event{Kind: EventKindLeaseLost, Job: &job, Err: err, Time: time.Now()})
}

// expired sends the events of the expired leases the expirer reclaimed.
func (h *eventHub) expired(rows []*leasetype.JobRow) {
	if !h.wants(EventKindJobExpired) {
		return
	}
	now := time.Now()
	for _, r := range rows {
		h.send(&Event{Kind: EventKindJobExpired, Job: r, Time: now})
	}
}

// lostEvent sends the event of the lease's loss (lose), on the client that
// holds it.
func (l *lease) lostEvent(reason string) {
	if l.core != nil {
		l.core.events.leaseLost(l.row, &LeaseLostError{JobID: l.row.ID, Token: l.token, Reason: reason})
	}
}
