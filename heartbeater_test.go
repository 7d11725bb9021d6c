package leasehold

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// renewExec is an executor whose JobHeartbeat renews every lease it is
// given and records when each was renewed.
type renewExec struct {
	mu      sync.Mutex
	renewed map[int64][]time.Time
}

func (e *renewExec) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]int64, len(p.Leases))
	for i, r := range p.Leases {
		ids[i] = r.ID
		e.renewed[r.ID] = append(e.renewed[r.ID], time.Now())
	}
	return ids, nil
}

func (e *renewExec) renewals(id int64) []time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.renewed[id]...)
}

func testLease(id int64, ttl time.Duration) *lease {
	return newLease(&leasetype.JobRow{ID: id, LeaseToken: 1}, ttl, nil, time.Now())
}

func TestLeaseSetKicksOnlyForRenewalsBeforeTheNextTick(t *testing.T) {
	s := newLeaseSet()
	kicked := func() bool {
		select {
		case <-s.added:
			return true
		default:
			return false
		}
	}
	s.add(testLease(1, 30*time.Second))
	if !kicked() {
		t.Fatal("the first lease, before any tick, did not kick the heartbeater")
	}

	s.planTick(time.Now().Add(time.Second))
	s.add(testLease(2, 30*time.Second)) // renewal due in 10 s
	if kicked() {
		t.Fatal("a lease due after the planned tick kicked the heartbeater")
	}
	s.add(testLease(3, 600*time.Millisecond)) // renewal due in 200 ms
	if !kicked() {
		t.Fatal("a lease due before the planned tick did not kick the heartbeater")
	}

	if got := len(s.startTick(nil)); got != 3 {
		t.Fatalf("tick saw %d leases, want 3", got)
	}
	s.add(testLease(4, 30*time.Second))
	if !kicked() {
		t.Fatal("a lease added during a tick did not kick the heartbeater")
	}
}

// TestLeaseSetAddAll: a claim's leases added together are all held, each
// reports the lease it replaces on the same job, and the earliest renewal
// among them decides the kick.
func TestLeaseSetAddAll(t *testing.T) {
	s := newLeaseSet()
	old := testLease(2, 30*time.Second)
	s.add(old)
	<-s.added
	s.planTick(time.Now().Add(time.Second))
	ls := []*lease{testLease(1, 30*time.Second), testLease(2, 30*time.Second), testLease(3, 30*time.Second)}
	replaced := make([]*lease, len(ls))
	s.addAll(ls, replaced)
	if replaced[0] != nil || replaced[1] != old || replaced[2] != nil {
		t.Fatalf("replaced = %v, want only the second to replace the lease held on job 2", replaced)
	}
	for _, l := range ls {
		if s.get(l.row.ID, 1) != l {
			t.Fatalf("job %d: the set does not hold the lease added", l.row.ID)
		}
	}
	select {
	case <-s.added:
		t.Fatal("leases due after the planned tick kicked the heartbeater")
	default:
	}
	s.addAll([]*lease{testLease(4, 30*time.Second), testLease(5, 600*time.Millisecond)}, replaced)
	select {
	case <-s.added:
	default:
		t.Fatal("a lease due before the planned tick, second of its claim, did not kick the heartbeater")
	}
}

// TestEndLeases: leases ended together leave the set, free one slot each on
// their own producer, and free none twice (one whose slot freeSlot freed
// already, as for a CompleteTx being confirmed).
func TestEndLeases(t *testing.T) {
	core := &clientCore{leases: newLeaseSet()}
	p1, p2 := newProducer("a", 10, nil), newProducer("b", 10, nil)
	var ls []*lease
	for i, p := range []*producer{p1, p1, p2, p1, p2} {
		l := testLease(int64(i+1), 30*time.Second)
		l.core, l.producer = core, p
		core.leases.add(l)
		ls = append(ls, l)
	}
	p1.add(3)
	p2.add(2)
	ls[3].freeSlot() // p1: 2 left running
	endLeases(ls)
	if n := core.leases.count(); n != 0 {
		t.Fatalf("the set holds %d leases after they ended", n)
	}
	core.leases.wg.Wait() // returns: every lease counted as ended
	if p1.running != 0 || p2.running != 0 {
		t.Fatalf("running = %d and %d, want 0 and 0", p1.running, p2.running)
	}
}

// A short lease claimed while the heartbeater sleeps until its next
// planned tick is still renewed before it is due.
func TestHeartbeaterRenewsShortLeaseAddedWhileAsleep(t *testing.T) {
	exec := &renewExec{renewed: map[int64][]time.Time{}}
	leases := newLeaseSet()
	h := &heartbeater{exec: exec, leases: leases, writeMu: &sync.RWMutex{}, logger: slog.New(slog.DiscardHandler), stats: &statsCounters{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()

	long := testLease(1, 30*time.Second)
	leases.add(long)
	time.Sleep(100 * time.Millisecond) // the heartbeater now sleeps for up to a second

	const ttl = 900 * time.Millisecond
	short := testLease(2, ttl)
	_, due := short.times()
	leases.add(short)
	time.Sleep(ttl)

	got := exec.renewals(2)
	if len(got) == 0 {
		t.Fatalf("the %v lease was not renewed within its TTL", ttl)
	}
	if late := got[0].Sub(due); late > 100*time.Millisecond {
		t.Errorf("first renewal came %v after it was due", late)
	}
	if short.lost.Load() {
		t.Error("the short lease was lost")
	}
	if n := len(exec.renewals(1)); n != 0 {
		t.Errorf("the 30 s lease was renewed %d times in a second, want 0", n)
	}
}
