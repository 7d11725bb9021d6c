package leasehold

import (
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Stats are a client's counters since it was created. Lease expiries and
// handler errors are counted apart: a crash is not an error.
type Stats struct {
	// Claimed counts leases granted to this client.
	Claimed int64 `json:"claimed"`
	// Completed counts jobs this client completed (including by CompleteTx).
	Completed int64 `json:"completed"`
	// Failed counts attempts whose handler returned an error or panicked.
	Failed int64 `json:"failed"`
	// Discarded counts jobs this client discarded (permanent error, attempts exhausted, bad args).
	Discarded int64 `json:"discarded"`
	// Cancelled counts jobs this client ended as cancelled (by their
	// handler, or by a cancellation request on the running job).
	Cancelled int64 `json:"cancelled"`
	// CancelRequests counts running jobs whose handler this client
	// interrupted because JobCancel was called on them.
	CancelRequests int64 `json:"cancel_requests"`
	// Snoozed counts snoozes.
	Snoozed int64 `json:"snoozed"`
	// Released counts leases given back unworked.
	Released int64 `json:"released"`
	// LeasesLost counts leases this client lost while holding them.
	LeasesLost int64 `json:"leases_lost"`
	// FencedWrites counts this client's writes refused by the fencing check.
	FencedWrites int64 `json:"fenced_writes"`
	// AmbiguousCommits counts outcomes whose commit this client could not
	// see but found committed when it read the job back: a CompleteTx
	// transaction that committed although the handler then returned an
	// error (its COMMIT lost with the connection, say), or an outcome
	// write of the client's own that failed and whose retry was refused
	// because the first try had landed. Each is counted as the outcome it
	// was (Completed, Failed, ...), not as a lost lease.
	AmbiguousCommits int64 `json:"ambiguous_commits"`
	// Expired counts expired leases (of any client) this client's expirer reclaimed.
	Expired int64 `json:"expired"`
	// HeartbeatStatements counts batched renewal statements sent.
	HeartbeatStatements int64 `json:"heartbeat_statements"`
	// PeriodicEnqueued counts periodic jobs this client enqueued as leader.
	PeriodicEnqueued int64 `json:"periodic_enqueued"`
	// Pruned counts finished jobs and attempt rows this client's retention deleted.
	Pruned int64 `json:"pruned"`
	// EventsDropped counts events (Subscribe) dropped because a
	// subscription's channel was full, one per subscription missed.
	EventsDropped int64 `json:"events_dropped"`
	// NotificationsSilent counts the times this client found the database's
	// insert notifications not arriving while it was listening: its own
	// inserts' notifications did not come back within a few poll intervals
	// and no other arrived (LISTEN through a connection pooler in
	// transaction mode loses them). Jobs are still found by polling.
	NotificationsSilent int64 `json:"notifications_silent"`
	// HandlerTime is the total time spent in handlers.
	HandlerTime time.Duration `json:"handler_time"`
}

type statsCounters struct {
	claimed, completed, failed, discarded, cancelled, snoozed, released atomic.Int64
	leasesLost, fencedWrites, expired, heartbeats, handlerNanos         atomic.Int64
	cancelRequests, periodicEnqueued, pruned, eventsDropped             atomic.Int64
	notificationsSilent, ambiguousCommits                               atomic.Int64
}

func (s *statsCounters) observeDuration(d time.Duration) { s.handlerNanos.Add(int64(d)) }

func (s *statsCounters) countOutcome(item *driver.JobFinish) {
	switch item.Outcome {
	case leasetype.OutcomeFailed, leasetype.OutcomePanicked:
		s.failed.Add(1)
	case leasetype.OutcomeSnoozed:
		s.snoozed.Add(1)
	case leasetype.OutcomeReleased:
		s.released.Add(1)
	}
	switch item.State {
	case leasetype.JobStateCompleted:
		s.completed.Add(1)
	case leasetype.JobStateDiscarded:
		s.discarded.Add(1)
	case leasetype.JobStateCancelled:
		s.cancelled.Add(1)
	}
}

func (s *statsCounters) snapshot() Stats {
	return Stats{
		Claimed: s.claimed.Load(), Completed: s.completed.Load(), Failed: s.failed.Load(),
		Discarded: s.discarded.Load(), Cancelled: s.cancelled.Load(), Snoozed: s.snoozed.Load(),
		Released: s.released.Load(), LeasesLost: s.leasesLost.Load(), FencedWrites: s.fencedWrites.Load(),
		Expired: s.expired.Load(), HeartbeatStatements: s.heartbeats.Load(),
		CancelRequests: s.cancelRequests.Load(), PeriodicEnqueued: s.periodicEnqueued.Load(), Pruned: s.pruned.Load(),
		NotificationsSilent: s.notificationsSilent.Load(),
		AmbiguousCommits:    s.ambiguousCommits.Load(),
		EventsDropped:       s.eventsDropped.Load(),
		HandlerTime:         time.Duration(s.handlerNanos.Load()),
	}
}
