package leasehold

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// requestCancel cancels the handler because the job was cancelled from
// outside. It reports whether this call was the first to do so.
func (l *lease) requestCancel() bool {
	if !l.cancelRequested.CompareAndSwap(false, true) {
		return false
	}
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel(ErrJobCancelled)
	}
	return true
}

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

	mu       sync.Mutex
	deadline time.Time // local deadline (monotonic)
	lastSent time.Time // when the claim or last successful renewal was sent
	cancel   context.CancelCauseFunc

	done       atomic.Bool // handler returned: no more heartbeats
	completing atomic.Bool // CompleteTx wrote the completion in a user transaction
	lost       atomic.Bool // lease known lost: write nothing more
	// cancelRequested: JobCancel was called on the running job; its handler's
	// context is cancelled with ErrJobCancelled.
	cancelRequested atomic.Bool
}

func newLease(row *leasetype.JobRow, ttl time.Duration, entry *workerEntry, sentAt time.Time) *lease {
	l := &lease{row: row, token: row.LeaseToken, ttl: ttl, entry: entry}
	l.renewed(sentAt)
	return l
}

// renewed records a successful claim or renewal sent at sentAt.
func (l *lease) renewed(sentAt time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastSent = sentAt
	l.deadline = sentAt.Add(l.ttl - l.ttl/10)
}

// localDeadline returns the local deadline and the time the next renewal is due.
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

// lose marks the lease lost and cancels the handler with a *LeaseLostError.
// It reports whether this call was the one that lost it.
func (l *lease) lose(reason string) bool {
	if !l.lost.CompareAndSwap(false, true) {
		return false
	}
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel(&LeaseLostError{JobID: l.row.ID, Token: l.token, Reason: reason})
	}
	return true
}

// leaseSet is the set of leases a client holds.
type leaseSet struct {
	mu    sync.Mutex
	byID  map[int64]*lease
	added chan struct{} // kicks the heartbeater when a lease is added
	wg    sync.WaitGroup
}

func newLeaseSet() *leaseSet {
	return &leaseSet{byID: map[int64]*lease{}, added: make(chan struct{}, 1)}
}

func (s *leaseSet) add(l *lease) {
	s.mu.Lock()
	s.byID[l.row.ID] = l
	s.mu.Unlock()
	s.wg.Add(1)
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

func (s *leaseSet) get(id, token int64) *lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.byID[id]; l != nil && l.token == token {
		return l
	}
	return nil
}

// any reports whether the set holds a lease.
func (s *leaseSet) any() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID) > 0
}

func (s *leaseSet) snapshot() []*lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*lease, 0, len(s.byID))
	for _, l := range s.byID {
		out = append(out, l)
	}
	return out
}
