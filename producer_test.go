package leasehold

import (
	"context"
	"database/sql"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// slowClaimDriver delays every claim and records how many ran at once.
type slowClaimDriver struct {
	driver.Driver[*sql.Tx]
	delay time.Duration

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
	claims      int
	starts      []time.Time // when each claim began
	ends        []time.Time // when each claim returned, in the order they did
}

func (d *slowClaimDriver) GetExecutor() driver.Executor {
	return &slowClaimExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

type slowClaimExecutor struct {
	driver.Executor
	d *slowClaimDriver
}

func (e *slowClaimExecutor) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	e.d.mu.Lock()
	e.d.inFlight++
	e.d.claims++
	e.d.starts = append(e.d.starts, time.Now())
	e.d.maxInFlight = max(e.d.maxInFlight, e.d.inFlight)
	e.d.mu.Unlock()
	defer func() {
		e.d.mu.Lock()
		e.d.inFlight--
		e.d.ends = append(e.d.ends, time.Now())
		e.d.mu.Unlock()
	}()
	time.Sleep(e.d.delay)
	return e.Executor.JobClaim(ctx, p)
}

// TestClaimsOverlap: while a claim is in flight and enough workers free up,
// the producer starts a second claim at once, never a third; every job
// still runs exactly once.
func TestClaimsOverlap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newTestSQLite(t)
	d := &slowClaimDriver{Driver: base, delay: 30 * time.Millisecond}

	const jobs = 1500
	var (
		mu   sync.Mutex
		runs = map[int]int{}
	)
	w := NewWorkers()
	AddWorker(w, WorkFunc[overlapArgs](func(ctx context.Context, j *Job[overlapArgs]) error {
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		runs[j.Args.N]++
		mu.Unlock()
		return nil
	}))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]QueueConfig{defaultQueue: {MaxWorkers: 300}}})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]InsertManyParams, jobs)
	for i := range params {
		params[i] = InsertManyParams{Args: overlapArgs{N: i}}
	}
	if _, err := c.InsertManyFast(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for c.Stats().Completed < jobs && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Completed; got != jobs {
		t.Fatalf("completed %d of %d jobs", got, jobs)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range jobs {
		if runs[i] != 1 {
			t.Fatalf("job %d ran %d times, want once", i, runs[i])
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.maxInFlight != maxClaimsInFlight {
		t.Fatalf("at most %d claims in flight at once over %d claims, want %d (overlapping, never more)", d.maxInFlight, d.claims, maxClaimsInFlight)
	}
}

// TestRestartAfterClaimInFlight: a claim still in flight when Stop begins
// gives back the workers it reserved, so a restarted client claims again.
// (The loop used to undo a claim's reservation only when it read the
// claim's result, which a stopping loop never does.)
func TestRestartAfterClaimInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := &slowClaimDriver{Driver: newTestSQLite(t), delay: 300 * time.Millisecond}
	w := NewWorkers()
	AddWorker(w, WorkFunc[overlapArgs](func(context.Context, *Job[overlapArgs]) error { return nil }))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Stop while the first claim sleeps in JobClaim.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d.mu.Lock()
		inFlight := d.inFlight
		d.mu.Unlock()
		if inFlight > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no claim in flight within 10s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range c.core.producers {
		if free := p.free(); free != p.maxWorkers {
			t.Fatalf("queue %s after Stop: %d of %d workers free; a claim's reservation outlived the loop", p.queue, free, p.maxWorkers)
		}
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	if _, err := c.Insert(ctx, overlapArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for c.Stats().Completed < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted client never ran the job: stats %+v", c.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDeferredClaimStartsOnReturn: while wake-ups keep arriving, a claim
// asked for while another is in flight starts as soon as that one has
// returned and the cooldown since its start has passed. The loop used to
// pick at random between a wake-up and the returned claim, and slept a
// cooldown after every wake-up it deferred, so the claim after a fast one
// came a cooldown or more late half the time, and the claim after a slow
// one always did. Claims here are of 10 workers, with jobs inserted one
// every 2 ms: each claim is full, and a wake-up is always waiting.
func TestDeferredClaimStartsOnReturn(t *testing.T) {
	t.Parallel()
	const cooldown = 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		claim time.Duration
	}{
		{"claim shorter than the cooldown", 20 * time.Millisecond},
		{"claim longer than the cooldown", 350 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := &slowClaimDriver{Driver: newTestSQLite(t), delay: tc.claim}
			w := NewWorkers()
			AddWorker(w, WorkFunc[overlapArgs](func(context.Context, *Job[overlapArgs]) error { return nil }))
			c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler), FetchCooldown: cooldown,
				Queues: map[string]QueueConfig{defaultQueue: {MaxWorkers: 10}}})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Stop(context.Background()) })
			const warmUp, measured = 2, 6
			for i := 0; ; i++ {
				d.mu.Lock()
				n := len(d.starts)
				d.mu.Unlock()
				if n > warmUp+measured {
					break
				}
				if i > 10_000 {
					t.Fatalf("%d claims in %d inserts", n, i)
				}
				if _, err := c.Insert(ctx, overlapArgs{N: i}, nil); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * time.Millisecond)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			// Claims never overlap here (10 workers), so the i-th return
			// is the i-th claim's. Each claim is due when the one before
			// has returned and the cooldown since its start has passed;
			// the tolerance absorbs a loaded machine's lateness, not a
			// cooldown.
			const tolerance = 150 * time.Millisecond
			for i := warmUp + 1; i <= warmUp+measured; i++ {
				due := d.starts[i-1].Add(cooldown)
				if d.ends[i-1].After(due) {
					due = d.ends[i-1]
				}
				if late := d.starts[i].Sub(due); late > tolerance {
					t.Errorf("claim %d started %v after it was due (the claim before returned %v after its start; cooldown %v); want at most %v",
						i, late, d.ends[i-1].Sub(d.starts[i-1]), cooldown, tolerance)
				}
			}
		})
	}
}

type overlapArgs struct {
	N int `json:"n"`
}

func (overlapArgs) Kind() string { return "overlap" }

// TestClaimsIdleAfterWork: once the jobs are done, the producer claims only
// when woken or polled: a claim's return alone does not start another.
func TestClaimsIdleAfterWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := newTestSQLite(t)
	d := &slowClaimDriver{Driver: base, delay: time.Millisecond}
	w := NewWorkers()
	AddWorker(w, WorkFunc[overlapArgs](func(context.Context, *Job[overlapArgs]) error { return nil }))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler), PollInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	for i := range 20 {
		if _, err := c.Insert(ctx, overlapArgs{N: i}, nil); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for c.Stats().Completed < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := c.Stats().Completed; got != 20 {
		t.Fatalf("completed %d of 20 jobs", got)
	}
	time.Sleep(100 * time.Millisecond) // the last wake-ups settle
	d.mu.Lock()
	before := d.claims
	d.mu.Unlock()
	time.Sleep(500 * time.Millisecond)
	d.mu.Lock()
	after := d.claims
	d.mu.Unlock()
	if after != before {
		t.Fatalf("%d claims in 500 ms with nothing inserted, nothing running and a 1-minute poll; want none", after-before)
	}
}

// TestProducerCursor: full claims move the cursor forward, in whatever
// order overlapping claims return; a claim that is not full, a wake-up from
// outside, a poll (rewind), an insert that sorts before the cursor, another
// client's insert while the cursor is past the first priority, and a cursor
// older than the poll interval send the next claim back to the head.
func TestProducerCursor(t *testing.T) {
	p := newProducer("q", 10, nil)
	const poll = time.Second
	start := time.Unix(5000, 0)
	now := start
	at := func(priority int, id int64) *leasetype.JobRow {
		return &leasetype.JobRow{ID: id, Priority: priority, ScheduledAt: time.Unix(1000, 0)}
	}
	want := func(step string, wantID int64) {
		t.Helper()
		now = now.Add(time.Millisecond)
		got := p.claimFrom(now, poll)
		switch {
		case wantID == 0 && got != nil:
			t.Fatalf("%s: claim starts after job %d, want the head", step, got.ID)
		case wantID != 0 && (got == nil || got.ID != wantID):
			t.Fatalf("%s: claim starts after %+v, want after job %d", step, got, wantID)
		}
	}
	want("new producer", 0)
	p.advance([]*leasetype.JobRow{at(1, 3), at(1, 4), at(1, 5)}, true)
	want("after a full claim", 5)
	p.advance([]*leasetype.JobRow{at(1, 2)}, true) // an overlapping claim returning late
	want("after an earlier full claim", 5)
	p.advance([]*leasetype.JobRow{at(2, 1)}, true) // a lower priority comes later in claim order
	want("after a claim of the next priority", 1)
	p.advance([]*leasetype.JobRow{at(2, 9)}, false)
	want("after a claim that was not full", 0)

	p.advance([]*leasetype.JobRow{at(1, 7)}, true)
	p.wakeupFromHead()
	want("after a wake-up from outside", 0)
	p.advance([]*leasetype.JobRow{at(1, 8)}, true)
	want("after the next full claim", 8)
	p.rewind()
	p.advance([]*leasetype.JobRow{at(1, 9)}, true) // a claim in flight at the rewind
	want("after a poll", 0)
	p.advance(nil, false)
	want("after a failed claim", 0)

	p.advance([]*leasetype.JobRow{at(2, 10)}, true)
	p.wakeupFor(driver.PositionOf(at(2, 11)))
	want("after an insert behind the cursor", 10)
	p.wakeupFor(driver.PositionOf(at(1, 12)))
	want("after an insert of a higher priority", 0)

	p.advance([]*leasetype.JobRow{at(1, 13)}, true)
	p.wakeupForNotice()
	want("after another client's insert, cursor in the first priority", 13)
	p.advance([]*leasetype.JobRow{at(2, 14)}, true)
	p.wakeupForNotice()
	want("after another client's insert, cursor past the first priority", 0)

	p.advance([]*leasetype.JobRow{at(1, 15)}, true)
	now = now.Add(poll - 2*time.Millisecond)
	want("just before a poll interval", 15)
	now = now.Add(time.Millisecond)
	want("a poll interval after the last claim from the head", 0)
}

// finishClaimDriver offers driver.FinishClaimer on top of a backend that
// has none, as JobFinish then JobClaim, and counts the combined calls.
type finishClaimDriver struct {
	driver.Driver[*sql.Tx]
	combined atomic.Int64
}

func (d *finishClaimDriver) GetExecutor() driver.Executor {
	return &finishClaimExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

type finishClaimExecutor struct {
	driver.Executor
	d *finishClaimDriver
}

func (e *finishClaimExecutor) JobFinishAndClaim(ctx context.Context, f *driver.JobFinishParams, c *driver.JobClaimParams) ([]int64, []*leasetype.JobRow, error) {
	e.d.combined.Add(1)
	written, err := e.Executor.JobFinish(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	rows, err := e.Executor.JobClaim(ctx, c)
	return written, rows, err
}

// TestClaimsAlongOutcomes drains a backlog through an executor that claims
// in the round trip of an outcome batch: every job runs once, and never
// more handlers run at once than MaxWorkers, although the completer claims
// for the workers its batch frees before the batch is reported.
func TestClaimsAlongOutcomes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := &finishClaimDriver{Driver: newTestSQLite(t)}
	const (
		jobs    = 1200
		workers = 40
	)
	var (
		mu                  sync.Mutex
		runs                = map[int]int{}
		running, mostAtOnce int
	)
	w := NewWorkers()
	AddWorker(w, WorkFunc[overlapArgs](func(ctx context.Context, j *Job[overlapArgs]) error {
		mu.Lock()
		running++
		mostAtOnce = max(mostAtOnce, running)
		runs[j.Args.N]++
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
		return nil
	}))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]QueueConfig{defaultQueue: {MaxWorkers: workers}}})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]InsertManyParams, jobs)
	for i := range params {
		params[i] = InsertManyParams{Args: overlapArgs{N: i}}
	}
	if _, err := c.InsertManyFast(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for c.Stats().Completed < jobs && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.Stats().Completed; got != jobs {
		t.Fatalf("completed %d of %d jobs", got, jobs)
	}
	if d.combined.Load() == 0 {
		t.Fatal("no outcome batch carried a claim")
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range jobs {
		if runs[i] != 1 {
			t.Fatalf("job %d ran %d times, want once", i, runs[i])
		}
	}
	if mostAtOnce > workers {
		t.Fatalf("%d handlers ran at once, want at most MaxWorkers %d", mostAtOnce, workers)
	}
}

// TestGatherFollowsJobTime: a claim of a queue with a backlog gathers
// freed workers for half its handlers' mean run time, within
// [backlogGather, maxBacklogGather], so that its claims stay about a
// quarter of the workers large however slowly jobs end; without a backlog,
// or with a quarter of the workers free, it claims at once.
func TestGatherFollowsJobTime(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ mean, want time.Duration }{
		{0, backlogGather},
		{time.Millisecond, backlogGather},
		{60 * time.Millisecond, 30 * time.Millisecond},
		{time.Minute, maxBacklogGather},
	} {
		if got := gatherFor(tc.mean); got != tc.want {
			t.Errorf("gatherFor(%v) = %v, want %v", tc.mean, got, tc.want)
		}
	}

	p := newProducer("q", 100, nil)
	for range 200 {
		p.observeJob(80 * time.Millisecond)
	}
	if got := time.Duration(p.jobNanos.Load()); got != 80*time.Millisecond {
		t.Fatalf("moving average of 80ms jobs = %v", got)
	}
	p.add(90)
	lastClaim := time.Now()
	if got := p.gatherWait(10, lastClaim); got != 0 {
		t.Fatalf("without a backlog the claim waits %v, want 0", got)
	}
	p.claimed(true, 0)
	if got := p.gatherWait(10, lastClaim); got <= backlogGather || got > 40*time.Millisecond {
		t.Fatalf("with a backlog and 80ms jobs the claim waits %v, want more than %v, at most 40ms", got, backlogGather)
	}
	if got := p.gatherWait(25, lastClaim); got != 0 {
		t.Fatalf("with a quarter of the workers free the claim waits %v, want 0", got)
	}
	// With a quarter free, a claim follows the last one's start after
	// claimSpacing times the last claim's duration, within gatherFor.
	lastClaim = time.Now()
	p.claimNanos.Store(int64(10 * time.Millisecond))
	if got := p.gatherWait(25, lastClaim); got <= 10*time.Millisecond || got > claimSpacing*10*time.Millisecond {
		t.Fatalf("with a quarter free after a 10ms claim the claim waits %v, want more than 10ms, at most %v", got, claimSpacing*10*time.Millisecond)
	}
	p.claimNanos.Store(int64(time.Second))
	if got := p.gatherWait(25, lastClaim); got <= backlogGather || got > 40*time.Millisecond {
		t.Fatalf("with a quarter free after a 1s claim the claim waits %v, want gatherFor's bound: more than %v, at most 40ms", got, backlogGather)
	}
	if got := p.gatherWait(25, lastClaim.Add(-time.Second)); got != 0 {
		t.Fatalf("a second after the last claim started the claim waits %v, want 0", got)
	}
	p.claimNanos.Store(0)
	for range 200 {
		p.observeJob(time.Millisecond)
	}
	if got := p.gatherWait(10, lastClaim); got > backlogGather {
		t.Fatalf("after the jobs got short the claim waits %v, want at most %v", got, backlogGather)
	}
}

// TestOwedClaim: a wake-up that found every worker busy is owed a claim:
// the next job to end wakes the loop, unless a claim started since (the
// loop's, or one carried by outcomes) made it. A claim in flight at the
// wake-up does not make it.
func TestOwedClaim(t *testing.T) {
	woken := func(p *producer) bool {
		select {
		case <-p.wake:
			return true
		default:
			return false
		}
	}
	p := newProducer("q", 1, nil)
	p.add(1)
	p.jobDone()
	if woken(p) {
		t.Fatal("a job's end woke the loop with no backlog and no claim owed")
	}

	p.add(1)
	p.owe()
	p.jobDone()
	if !woken(p) {
		t.Fatal("a job's end did not wake the loop owed a claim")
	}
	p.add(1)
	p.jobDone()
	if woken(p) {
		t.Fatal("the owed claim woke the loop twice")
	}

	// A claim of the loop's that starts after the wake-up makes it.
	p.add(1)
	p.owe()
	p.reserveClaim(1)
	p.reserve(-1)
	p.jobDone()
	if woken(p) {
		t.Fatal("a job's end woke the loop after a claim started since the wake-up")
	}

	// So does one carried by outcomes; one in flight since before does not.
	p.accept(t.Context())
	p.claimed(true, 0) // a backlog, for claimAlong
	p.add(1)
	n, _ := p.claimAlong(1) // in flight before the wake-up
	p.owe()
	p.claimed(false, 0) // it found nothing: the backlog is gone
	p.alongDone(n)
	p.jobDone()
	if !woken(p) {
		t.Fatal("a claim in flight at the wake-up made the claim owed")
	}
	p.claimed(true, 0)
	p.add(1)
	p.owe()
	n, _ = p.claimAlong(1) // starts after the wake-up
	p.claimed(false, 0)
	p.alongDone(n)
	p.jobDone()
	if woken(p) {
		t.Fatal("a job's end woke the loop after a claim carried by outcomes started since the wake-up")
	}
	p.refuse()
}
