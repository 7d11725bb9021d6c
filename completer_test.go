package leasehold

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// finishExec is an executor whose JobFinish hands each call to the test,
// which answers it.
type finishExec struct {
	calls chan *finishCall
}

// JobAttempts finds no job: a refused completion is then a lost lease.
func (e *finishExec) JobAttempts(ctx context.Context, p *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	return nil, driver.ErrNotFound
}

type finishCall struct {
	ids    []int64
	answer chan error // nil: all written
}

func (e *finishExec) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	call := &finishCall{answer: make(chan error)}
	for _, it := range p.Items {
		call.ids = append(call.ids, it.ID)
	}
	e.calls <- call
	if err := <-call.answer; err != nil {
		return nil, err
	}
	return call.ids, nil
}

// completerHarness runs a completer over a finishExec.
type completerHarness struct {
	t     *testing.T
	exec  *finishExec
	c     *completer
	mu    sync.Mutex
	done  map[int64]error
	dones chan int64
}

func newCompleterHarness(t *testing.T, maxBatch int) *completerHarness {
	h := &completerHarness{t: t, exec: &finishExec{calls: make(chan *finishCall, 16)}, done: map[int64]error{}, dones: make(chan int64, 1000)}
	h.c = newCompleter(h.exec, "owner", &sync.RWMutex{}, maxBatch, slog.New(slog.DiscardHandler), &statsCounters{})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		h.c.run(ctx)
		close(stopped)
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	return h
}

// submit hands the completer a completion of job id with a lease valid for
// a minute.
func (h *completerHarness) submit(id int64) {
	l := newLease(&leasetype.JobRow{ID: id, LeaseToken: 1}, time.Minute, nil, time.Now())
	item := &driver.JobFinish{ID: id, Token: 1, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
	h.c.finish(&finishRequest{item: item, lease: l, done: waiterFunc(func(err error) {
		h.mu.Lock()
		h.done[id] = err
		h.mu.Unlock()
		h.dones <- id
	})})
}

// waiterFunc is an outcomeWaiter.
type waiterFunc func(error)

func (f waiterFunc) outcomeWritten(err error) { f(err) }

// nextCall waits for the next JobFinish call.
func (h *completerHarness) nextCall() *finishCall {
	h.t.Helper()
	select {
	case c := <-h.exec.calls:
		return c
	case <-time.After(5 * time.Second):
		h.t.Fatal("no JobFinish call within 5s")
		return nil
	}
}

// noCall fails if a JobFinish call starts within d.
func (h *completerHarness) noCall(d time.Duration, why string) {
	h.t.Helper()
	select {
	case c := <-h.exec.calls:
		h.t.Fatalf("JobFinish called with %v: %s", c.ids, why)
	case <-time.After(d):
	}
}

// waitDone waits until n callbacks ran and returns their errors by job.
func (h *completerHarness) waitDone(n int) map[int64]error {
	h.t.Helper()
	for range n {
		select {
		case <-h.dones:
		case <-time.After(5 * time.Second):
			h.t.Fatal("outcome callbacks missing after 5s")
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int64]error{}
	for id, err := range h.done {
		out[id] = err
	}
	return out
}

// TestCompleterOneWriteAtATime: while a write is in flight, outcomes that
// end meanwhile wait and go together in the next statement; nothing is
// reported before its write returns.
func TestCompleterOneWriteAtATime(t *testing.T) {
	t.Parallel()
	h := newCompleterHarness(t, 100)
	h.submit(1)
	first := h.nextCall()
	for id := int64(2); id <= 11; id++ {
		h.submit(id)
	}
	h.noCall(100*time.Millisecond, "a second write started while the first was in flight and no full batch waited")
	if got := h.waitDone(0); len(got) != 0 {
		t.Fatalf("outcomes reported before their write returned: %v", got)
	}
	first.answer <- nil
	second := h.nextCall()
	if len(second.ids) != 10 {
		t.Fatalf("second write carried %v, want the 10 outcomes that waited", second.ids)
	}
	second.answer <- nil
	for id, err := range h.waitDone(11) {
		if err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
	}
}

// TestCompleterFullBatchesInParallel: a full batch waiting starts another
// write at once, up to completerFlushers in flight.
func TestCompleterFullBatchesInParallel(t *testing.T) {
	t.Parallel()
	const maxBatch = 5
	h := newCompleterHarness(t, maxBatch)
	h.submit(0)
	inFlight := []*finishCall{h.nextCall()}
	// Enough for every other flusher and one batch more.
	n := completerFlushers * maxBatch
	for id := int64(1); id <= int64(n); id++ {
		h.submit(id)
	}
	for len(inFlight) < completerFlushers {
		c := h.nextCall()
		if len(c.ids) != maxBatch {
			t.Fatalf("parallel write carried %d outcomes, want a full batch of %d", len(c.ids), maxBatch)
		}
		inFlight = append(inFlight, c)
	}
	h.noCall(100*time.Millisecond, "more writes than completerFlushers in flight")
	inFlight[0].answer <- nil
	last := h.nextCall()
	if len(last.ids) != maxBatch {
		t.Fatalf("write after a slot freed carried %d outcomes, want %d", len(last.ids), maxBatch)
	}
	for _, c := range append(inFlight[1:], last) {
		c.answer <- nil
	}
	if got := h.waitDone(n + 1); len(got) != n+1 {
		t.Fatalf("%d outcomes reported, want %d", len(got), n+1)
	}
}

// TestCompleterFailedWriteDoesNotHoldOthers: a write that fails retries on
// its own; outcomes that end meanwhile are written without waiting for it,
// and the failed batch is written on its retry.
func TestCompleterFailedWriteDoesNotHoldOthers(t *testing.T) {
	t.Parallel()
	h := newCompleterHarness(t, 100)
	h.submit(1)
	first := h.nextCall()
	first.answer <- errors.New("connection reset")
	h.submit(2)
	// The retry of job 1 and the write of job 2 may come in either order.
	calls := []*finishCall{h.nextCall(), h.nextCall()}
	sawTwo := false
	for _, c := range calls {
		for _, id := range c.ids {
			sawTwo = sawTwo || id == 2
		}
		c.answer <- nil
	}
	if !sawTwo {
		t.Fatalf("job 2 was not written while job 1's write was retrying: calls %v, %v", calls[0].ids, calls[1].ids)
	}
	for id, err := range h.waitDone(2) {
		if err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
	}
}

// TestOutcomeBatch: outcome batches are a quarter of the client's workers,
// within [minOutcomeBatch, CompleterMaxBatch].
func TestOutcomeBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxBatch int
		workers  []int
		want     int
	}{
		{1000, []int{100}, 100},
		{1000, []int{2000}, 500},
		{1000, []int{1000, 1000}, 500},
		{1000, []int{8000}, 1000},
		{50, []int{2000}, 50},
		{1000, nil, 100},
	} {
		cfg := &Config{CompleterMaxBatch: tc.maxBatch, Queues: map[string]QueueConfig{}}
		for i, w := range tc.workers {
			cfg.Queues[string(rune('a'+i))] = QueueConfig{MaxWorkers: w}
		}
		if got := outcomeBatch(cfg); got != tc.want {
			t.Errorf("CompleterMaxBatch %d, workers %v: outcome batch %d, want %d", tc.maxBatch, tc.workers, got, tc.want)
		}
	}
}

// TestClaimantOf: the producer most of a batch's leases belong to, counted
// alike whether the batch holds one producer's leases or several's; none
// when no lease has a producer or one completed in a transaction.
func TestClaimantOf(t *testing.T) {
	t.Parallel()
	p1, p2 := newProducer("a", 10, nil), newProducer("b", 10, nil)
	req := func(p *producer, completing bool) *finishRequest {
		l := &lease{producer: p}
		l.completing.Store(completing)
		return &finishRequest{lease: l}
	}
	for _, tc := range []struct {
		name  string
		batch []*finishRequest
		want  *producer
		n     int
	}{
		{"one producer", []*finishRequest{req(p1, false), req(nil, false), req(p1, false)}, p1, 2},
		{"two producers", []*finishRequest{req(p1, false), req(p2, false), req(p2, false), req(nil, false)}, p2, 2},
		{"a tie goes to the first to lead", []*finishRequest{req(p1, false), req(p2, false)}, p1, 1},
		{"no producer", []*finishRequest{req(nil, false)}, nil, 0},
		{"a CompleteTx lease", []*finishRequest{req(p1, false), req(p1, true)}, nil, 0},
		{"a CompleteTx lease among two producers", []*finishRequest{req(p1, false), req(p2, false), req(p1, true)}, nil, 0},
	} {
		if p, n := claimantOf(tc.batch); p != tc.want || n != tc.n {
			t.Errorf("%s: claimantOf = %p, %d; want %p, %d", tc.name, p, n, tc.want, tc.n)
		}
	}
}
