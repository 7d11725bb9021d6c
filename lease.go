package leasehold

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// lease is a job this client holds: the claimed row, the local deadline
// before which it may act, and the handle to cancel its handler.
//
// The local deadline is kept on the monotonic clock from the moment the
// claim or the last successful renewal was sent: the database computed the
// real expiry at or after that moment, so the local deadline never falls
// after the real one. A margin of a tenth of the TTL absorbs clock-rate drift.
type lease struct {
	row   *leasetype.JobRow
	token int64
	ttl   time.Duration
	entry *workerEntry // nil when the kind has no worker here

	core     *clientCore
	producer *producer // whose slot the job holds
	// outcome and request are the lease's final write and its place in the
	// completer's queue, kept here so that ending a job allocates nothing.
	outcome driver.JobFinish
	request finishRequest
	// hctx is the handler's context, carrying the lease for Checkpoint.
	hctx leaseContext

	mu         sync.Mutex
	deadline   time.Time // local deadline (monotonic)
	lastSent   time.Time // when the claim or last successful renewal was sent
	completeBy time.Time // while completing: when the database aborts the CompleteTx transaction
	cancel     context.CancelCauseFunc

	done       atomic.Bool // handler returned: no more heartbeats
	completing atomic.Bool // CompleteTx wrote the completion in a user transaction
	// completedTx: CompleteTx's write of the completion succeeded in the
	// caller's transaction (completing is set as it starts). A handler
	// that then returns nil has its commit confirmed (txConfirmer) instead
	// of an outcome written.
	completedTx atomic.Bool
	slotFreed   atomic.Bool // the job's worker slot was freed (freeSlot)
	lost        atomic.Bool // lease known lost: write nothing more
	// superseded: the database granted this job to this client again while
	// this lease was held, with the same token (it forgot this grant: a
	// failover rolled it back). Fencing cannot tell the two leases apart,
	// so this one writes nothing at all.
	superseded atomic.Bool
	// cancelRequested: JobCancel was called on the running job; its handler's
	// context is cancelled with ErrJobCancelled.
	cancelRequested atomic.Bool
}

func newLease(row *leasetype.JobRow, ttl time.Duration, entry *workerEntry, sentAt time.Time) *lease {
	l := new(lease)
	l.init(row, ttl, entry, sentAt)
	return l
}

// init sets up a zero lease of a claim sent at sentAt, before anything
// else sees it (so without its lock).
func (l *lease) init(row *leasetype.JobRow, ttl time.Duration, entry *workerEntry, sentAt time.Time) {
	l.row, l.token, l.ttl, l.entry = row, row.LeaseToken, ttl, entry
	l.lastSent, l.deadline = sentAt, leaseDeadline(sentAt, ttl)
}

// leaseDeadline is the local deadline of a lease of ttl claimed or renewed
// at sentAt.
func leaseDeadline(sentAt time.Time, ttl time.Duration) time.Time {
	return sentAt.Add(ttl - ttl/10)
}

// leaseTTL is the effective lease duration of a claimed job; the claim
// statement computed the same on the database.
func (c *clientCore) leaseTTL(row *leasetype.JobRow, entry *workerEntry) time.Duration {
	switch {
	case row.LeaseTTL > 0:
		return row.LeaseTTL
	case entry != nil && entry.opts.LeaseTTL > 0:
		return entry.opts.LeaseTTL
	default:
		return c.cfg.LeaseTTL
	}
}

// renewed records a successful claim or renewal sent at sentAt.
func (l *lease) renewed(sentAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSent = sentAt
	l.deadline = leaseDeadline(sentAt, l.ttl)
}

// startCompleting marks the lease as completed in a user transaction
// (CompleteTx) that the database aborts unless it commits by completeBy.
func (l *lease) startCompleting(completeBy time.Time) {
	l.mu.Lock()
	l.completeBy = completeBy
	l.mu.Unlock()
	l.completing.Store(true)
}

// completingUntil returns when the database aborts the CompleteTx
// transaction of a completing lease.
func (l *lease) completingUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.completeBy
}

// times returns the local deadline and the time the next renewal is due.
func (l *lease) times() (deadline, renewDue time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline, l.lastSent.Add(l.ttl / 3)
}

// setCancel installs the handler's cancel function; it reports false when the
// lease was already lost (the handler must not start).
func (l *lease) setCancel(cancel context.CancelCauseFunc) bool {
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	// A cancellation requested before the handler started applies to it.
	if l.cancelRequested.Load() {
		cancel(ErrJobCancelled)
	}
	return !l.lost.Load()
}

// interrupt cancels the handler's context with cause, if it started.
func (l *lease) interrupt(cause error) {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
}

// lose marks the lease lost and cancels the handler with a *LeaseLostError.
// It reports whether this call was the one that lost it, and then counts
// it in Stats.LeasesLost.
func (l *lease) lose(reason string) bool {
	if !l.lost.CompareAndSwap(false, true) {
		return false
	}
	l.interrupt(&LeaseLostError{JobID: l.row.ID, Token: l.token, Reason: reason})
	// Counted before the event is sent: a subscriber that sees the event
	// sees it in Stats.LeasesLost.
	if l.core != nil {
		l.core.stats.leasesLost.Add(1)
	}
	l.lostEvent(reason)
	return true
}

// supersede stops a lease the database granted again to this client (see
// lease.superseded): its handler is cancelled and it writes nothing more.
func (l *lease) supersede(next *lease) {
	l.superseded.Store(true)
	reason := fmt.Sprintf("the database granted this job to this client again (token %d): it forgot this lease, as after a failover that rolled it back", next.token)
	l.lose(reason)
	l.core.logger.Error("leasehold: lease superseded: the database granted a job this client holds to it again; the older handler is cancelled and writes nothing",
		"job_id", l.row.ID, "token", l.token, "new_token", next.token)
}

// sameClaim reports whether row is the row of l's claim, not of another
// grant of the job with the same token (see lease.superseded). A row
// without a lease time cannot be told apart and counts as the same.
func (l *lease) sameClaim(row *leasetype.JobRow) bool {
	return row.LeasedAt == nil || l.row.LeasedAt == nil || row.LeasedAt.Equal(*l.row.LeasedAt)
}

// requestCancel cancels the handler because the job was cancelled from
// outside. It reports whether this call was the first to do so.
func (l *lease) requestCancel() bool {
	if !l.cancelRequested.CompareAndSwap(false, true) {
		return false
	}
	l.interrupt(ErrJobCancelled)
	return true
}

// outcomeWritten counts the outcome written, or logs it refused, and ends
// the lease. It runs on a completer goroutine.
func (l *lease) outcomeWritten(err error) {
	l.outcomeDone(err)
	l.end()
}

// outcomeDone is outcomeWritten but for the end of the lease, which the
// caller sees to (end, or endLeases with others).
func (l *lease) outcomeDone(err error) {
	c, item := l.core, &l.outcome
	if err != nil {
		if IsLeaseLost(err) {
			c.stats.fencedWrites.Add(1)
			l.lose("outcome refused")
			c.logger.Warn("leasehold: job outcome not written, lease lost", "job_id", l.row.ID, "token", l.token, "error", err)
		}
		return
	}
	c.stats.countOutcome(item)
	c.events.outcome(l.row, item)
	if item.State == leasetype.JobStateAvailable || item.State == leasetype.JobStateScheduled && item.ScheduledAt != nil && !item.ScheduledAt.After(time.Now()) {
		c.wakeQueue(l.row.Queue)
	}
}

// end releases the lease and frees its job's slot, if freeSlot did not
// already.
func (l *lease) end() {
	l.core.leases.remove(l)
	l.freeSlot()
}

// endLeases is end for each of ls, with one lock of the lease set per run
// of leases of one client and one count of freed slots per run of leases
// of one producer.
func endLeases(ls []*lease) {
	for rest := ls; len(rest) > 0; {
		set, n := rest[0].core.leases, 1
		for n < len(rest) && rest[n].core.leases == set {
			n++
		}
		set.removeAll(rest[:n])
		rest = rest[n:]
	}
	var (
		p     *producer
		freed int
	)
	for _, l := range ls {
		if !l.slotFreed.CompareAndSwap(false, true) {
			continue
		}
		if l.producer != p && freed > 0 {
			p.jobsDone(freed)
			freed = 0
		}
		p = l.producer
		freed++
	}
	if freed > 0 {
		p.jobsDone(freed)
	}
}

// freeSlot frees the lease's worker slot once, before the lease ends when
// nothing of the job is left to write (a CompleteTx whose commit is being
// confirmed).
func (l *lease) freeSlot() {
	if l.slotFreed.CompareAndSwap(false, true) {
		l.producer.jobDone()
	}
}

// leaseSet is the set of leases a client holds.
type leaseSet struct {
	mu   sync.Mutex
	byID map[int64]*lease
	// tickAt is when the heartbeater next looks at the leases of its own
	// accord; zero while it is looking (and before its first look). A new
	// lease kicks it only when its renewal falls due before then: with the
	// default TTL a new lease is due in ten seconds and the heartbeater
	// looks at least once a second anyway, so a busy queue's claims do not
	// each make it walk every lease.
	tickAt time.Time
	added  chan struct{} // kicks the heartbeater
	wg     sync.WaitGroup
}

func newLeaseSet() *leaseSet {
	return &leaseSet{byID: map[int64]*lease{}, added: make(chan struct{}, 1)}
}

// add adds l and returns the lease it replaces, one this client still held
// on the same job (nil when none).
func (s *leaseSet) add(l *lease) (replaced *lease) {
	var r [1]*lease
	s.addAll([]*lease{l}, r[:])
	return r[0]
}

// addAll adds ls, new leases of one claim, under one lock, and sets
// replaced[i] to the lease ls[i] replaces, one this client still held on
// the same job (nil when none); replaced is at least as long as ls.
func (s *leaseSet) addAll(ls []*lease, replaced []*lease) {
	if len(ls) == 0 {
		return
	}
	// The leases are new: nothing else reads their times yet.
	renewDue := ls[0].lastSent.Add(ls[0].ttl / 3)
	for _, l := range ls[1:] {
		renewDue = earliest(renewDue, l.lastSent.Add(l.ttl/3))
	}
	s.wg.Add(len(ls))
	s.mu.Lock()
	for i, l := range ls {
		replaced[i] = s.byID[l.row.ID]
		s.byID[l.row.ID] = l
	}
	kick := s.tickAt.IsZero() || renewDue.Before(s.tickAt)
	s.mu.Unlock()
	if !kick {
		return
	}
	select {
	case s.added <- struct{}{}:
	default:
	}
}

func (s *leaseSet) remove(l *lease) {
	s.mu.Lock()
	if s.byID[l.row.ID] == l {
		delete(s.byID, l.row.ID)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// removeAll is remove for each of ls, under one lock.
func (s *leaseSet) removeAll(ls []*lease) {
	s.mu.Lock()
	for _, l := range ls {
		if s.byID[l.row.ID] == l {
			delete(s.byID, l.row.ID)
		}
	}
	s.mu.Unlock()
	s.wg.Add(-len(ls))
}

func (s *leaseSet) get(id, token int64) *lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.byID[id]; l != nil && l.token == token {
		return l
	}
	return nil
}

// count returns how many leases the set holds.
func (s *leaseSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

// any reports whether the set holds a lease.
func (s *leaseSet) any() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID) > 0
}

// snapshot returns the leases held, in buf's storage.
func (s *leaseSet) snapshot(buf []*lease) []*lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	return appendLeases(buf[:0], s.byID)
}

// startTick is snapshot for the heartbeater's tick: until planTick, every
// new lease kicks it, since the tick may not see it.
func (s *leaseSet) startTick(buf []*lease) []*lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tickAt = time.Time{}
	return appendLeases(buf[:0], s.byID)
}

// planTick records when the heartbeater looks next of its own accord.
func (s *leaseSet) planTick(at time.Time) {
	s.mu.Lock()
	s.tickAt = at
	s.mu.Unlock()
}

func appendLeases(buf []*lease, byID map[int64]*lease) []*lease {
	for _, l := range byID {
		buf = append(buf, l)
	}
	return buf
}
