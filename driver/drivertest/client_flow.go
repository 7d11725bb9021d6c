package drivertest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// flowArgs is a short job whose worker measures how many of its kind run at
// once, across every client of the test (they share one process).
type flowArgs struct {
	N int `json:"n"`
}

func (flowArgs) Kind() string { return "drivertest_flow" }

// flowOtherArgs is a second kind in the same queue.
type flowOtherArgs struct {
	N int `json:"n"`
}

func (flowOtherArgs) Kind() string { return "drivertest_flow_other" }

// concurrency counts handlers running now and the most seen at once.
type concurrency struct {
	now, peak atomic.Int64
	done      atomic.Int64
	starts    sync.Map // job ID → start count
}

func (c *concurrency) enter(id int64) {
	n := c.now.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	v, _ := c.starts.LoadOrStore(id, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (c *concurrency) leave() {
	c.now.Add(-1)
	c.done.Add(1)
}

// work holds the job for d, or until its context ends.
func (c *concurrency) work(ctx context.Context, id int64, d time.Duration) error {
	c.enter(id)
	defer c.leave()
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// testClientGlobalLimit: a fleet-wide limit of 3 on a queue is never
// exceeded — neither by handlers running at once nor by running jobs with
// live leases sampled from the database — while 4 clients with 50 workers
// each drain 5,000 jobs and one of them is killed part-way.
func testClientGlobalLimit[TTx any](t *testing.T, b Backend[TTx]) {
	const (
		limit    = 3
		clients  = 4
		jobs     = 5000
		workTime = 200 * time.Microsecond
	)
	runHeavy(t)
	env := newClientEnv(t, b)
	ctx := context.Background()
	var cc concurrency
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[flowArgs](func(ctx context.Context, j *leasehold.Job[flowArgs]) error {
		return cc.work(ctx, j.ID, workTime)
	}))
	cfg := func(id string) leasehold.Config {
		return leasehold.Config{
			ID: id, LeaseTTL: time.Second, Workers: workers,
			Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: 50, GlobalLimit: limit}},
		}
	}
	fd := newFaultDriver(env.d)
	victim := env.client(fd, cfg("victim"))
	for i := range clients - 1 {
		env.client(nil, cfg(fmt.Sprintf("survivor-%d", i)))
	}

	dbPeak, stop := sampleLiveLeases(env.exec, leasehold.DefaultQueue, 20*time.Millisecond)

	params := make([]leasehold.InsertManyParams, jobs)
	for i := range params {
		params[i] = leasehold.InsertManyParams{Args: flowArgs{N: i}}
	}
	if _, err := victim.InsertManyFast(ctx, params); err != nil {
		t.Fatalf("InsertManyFast: %v", err)
	}
	// Generous waits: under the race detector an embedded SQLite runs each
	// statement some twenty times slower, and the suite runs in parallel.
	waitFor(t, 300*time.Second, func() bool { return cc.done.Load() >= jobs/3 }, func() string {
		return fmt.Sprintf("%d of %d jobs done before the kill", cc.done.Load(), jobs)
	})
	fd.set(faultPartition)
	killedAt := cc.done.Load()

	waitFor(t, 600*time.Second, func() bool {
		counts, err := env.exec.JobCountByState(ctx)
		if err != nil {
			return false
		}
		for _, c := range counts {
			if c.State == leasetype.JobStateCompleted && c.Count == jobs {
				return true
			}
		}
		return false
	}, func() string { return fmt.Sprintf("%d handler runs, not all %d jobs completed", cc.done.Load(), jobs) })
	stop()

	if p := cc.peak.Load(); p > limit {
		t.Fatalf("%d handlers ran at once, global limit %d", p, limit)
	}
	if p := dbPeak(); p > limit {
		t.Fatalf("the database showed %d running jobs with live leases, global limit %d", p, limit)
	}
	if cc.peak.Load() < limit {
		t.Fatalf("at most %d handlers ran at once: the limit of %d was never reached, so the test proves nothing", cc.peak.Load(), limit)
	}
	t.Logf("%d jobs, peak %d handlers / %d live leases (limit %d), victim killed after %d", jobs, cc.peak.Load(), dbPeak(), limit, killedAt)
}

// sampleLiveLeases counts queue's running jobs with a live lease every
// period, from the database, until stop is called; peak is the most it
// counted.
func sampleLiveLeases(exec driver.Executor, queue string, every time.Duration) (peak func() int64, stop func()) {
	var most atomic.Int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			n, err := exec.JobCountRunning(context.Background(), &driver.JobCountRunningParams{Queue: queue})
			if err == nil && n.Queue > most.Load() {
				most.Store(n.Queue)
			}
		}
	}()
	var once sync.Once
	return most.Load, func() {
		once.Do(func() { close(done) })
		<-sampled
	}
}

// testClientGlobalLimitRenewalInFlight: a renewal that checked its lease
// before the lease expired and commits after a limited claim counted the
// running jobs does not take the queue past its limit. Another owner's
// lease is renewed in a transaction held open past the lease's expiry; a
// client with a global limit of 1 must not start the queue's other job
// then, nor while the renewed lease is live, and runs both once that lease
// expires and is reclaimed.
func testClientGlobalLimitRenewalInFlight[TTx any](t *testing.T, b Backend[TTx]) {
	const (
		claimTTL = time.Second
		renewTTL = 3 * time.Second
		hold     = 2 * time.Second // the renewal's transaction stays open this long after the lease expired
		workTime = 300 * time.Millisecond
	)
	env := newClientEnv(t, b)
	ctx := context.Background()
	kind := flowArgs{}.Kind()
	jobs := mustInsert(t, env.exec, jobParams(kind, leasehold.DefaultQueue), jobParams(kind, leasehold.DefaultQueue))
	ghost := mustClaimOne(t, env.exec, claimParams(leasehold.DefaultQueue, "ghost", 1, claimTTL))

	tx, err := env.exec.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	committed := false
	t.Cleanup(func() {
		if !committed {
			_ = tx.Rollback(context.Background())
		}
	})
	renewed, err := tx.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Owner: "ghost",
		Leases: []driver.LeaseRenewal{{ID: ghost.ID, Token: ghost.LeaseToken, TTL: renewTTL}}})
	if err != nil || len(renewed) != 1 {
		t.Fatalf("setup: renewal in a transaction before the lease of %v expired: renewed %v, %v", claimTTL, renewed, err)
	}
	waitLeaseExpired(t, env.exec, ghost) // as committed: the renewal is not

	var cc concurrency
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[flowArgs](func(ctx context.Context, j *leasehold.Job[flowArgs]) error {
		return cc.work(ctx, j.ID, workTime)
	}))
	fd := newFaultDriver(env.d)
	env.client(fd, leasehold.Config{ID: "limited", Workers: workers,
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: 5, GlobalLimit: 1}}})

	dbPeak, stop := sampleLiveLeases(env.exec, leasehold.DefaultQueue, 10*time.Millisecond)
	defer stop()

	// The client's limited claims run while the renewal is in flight (on
	// SQLite they wait for its write lock).
	waitFor(t, 60*time.Second, func() bool { return fd.begins.Load() >= 2 }, func() string {
		return fmt.Sprintf("%d transactions begun by the limited client", fd.begins.Load())
	})
	time.Sleep(hold)
	if n := cc.peak.Load(); n > 0 {
		t.Fatalf("a handler started while another owner's renewal was in flight (global limit 1): its lease was counted as free")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit the renewal: %v", err)
	}
	committed = true

	waitFor(t, 120*time.Second, func() bool { return cc.done.Load() >= 2 }, func() string {
		return fmt.Sprintf("%d of 2 jobs done", cc.done.Load())
	})
	stop()
	if p := dbPeak(); p > 1 {
		t.Fatalf("the database showed %d running jobs with live leases, global limit 1", p)
	}
	if p := cc.peak.Load(); p > 1 {
		t.Fatalf("%d handlers ran at once, global limit 1", p)
	}
	for _, j := range jobs {
		v, ok := cc.starts.Load(j.ID)
		if !ok || v.(*atomic.Int64).Load() != 1 {
			t.Errorf("job %d: started %v times, want once", j.ID, v)
		}
	}
	var expired bool
	for _, a := range mustAttempts(t, env.exec, ghost.ID) {
		if a.Token == ghost.LeaseToken && a.Outcome == leasetype.OutcomeLeaseExpired {
			expired = true
		}
	}
	if !expired {
		t.Errorf("job %d: no lease_expired attempt for the renewed lease of token %d", ghost.ID, ghost.LeaseToken)
	}
}

// testClientKindLimit: a fleet-wide limit on one kind holds across two
// clients and leaves the other kinds of the queue unlimited.
func testClientKindLimit[TTx any](t *testing.T, b Backend[TTx]) {
	const kindLimit = 2
	env := newClientEnv(t, b)
	var limited, free concurrency
	workers := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(workers, leasehold.WorkFunc[flowArgs](func(ctx context.Context, j *leasehold.Job[flowArgs]) error {
		return limited.work(ctx, j.ID, 5*time.Millisecond)
	}), &leasehold.WorkerOpts{GlobalLimit: kindLimit})
	leasehold.AddWorker(workers, leasehold.WorkFunc[flowOtherArgs](func(ctx context.Context, j *leasehold.Job[flowOtherArgs]) error {
		return free.work(ctx, j.ID, 20*time.Millisecond)
	}))
	cfg := leasehold.Config{Workers: workers, Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: 10}}}
	a := env.client(nil, cfg)
	env.client(nil, cfg)
	var params []leasehold.InsertManyParams
	for i := range 100 {
		params = append(params, leasehold.InsertManyParams{Args: flowArgs{N: i}}, leasehold.InsertManyParams{Args: flowOtherArgs{N: i}})
	}
	if _, err := a.InsertManyFast(context.Background(), params); err != nil {
		t.Fatalf("InsertManyFast: %v", err)
	}
	waitFor(t, 60*time.Second, func() bool { return limited.done.Load() >= 100 && free.done.Load() >= 100 }, func() string {
		return fmt.Sprintf("limited kind %d/100 done, free kind %d/100", limited.done.Load(), free.done.Load())
	})
	if p := limited.peak.Load(); p > kindLimit || p < kindLimit {
		t.Fatalf("limited kind peaked at %d handlers at once, want exactly its limit %d", p, kindLimit)
	}
	if p := free.peak.Load(); p <= kindLimit {
		t.Fatalf("unlimited kind peaked at %d handlers at once: the kind limit throttled the whole queue", p)
	}
}

// testClientRateLimit: a queue limited to 10 starts per 500 ms across two
// clients starts no more than that, within one period's tolerance.
func testClientRateLimit[TTx any](t *testing.T, b Backend[TTx]) {
	const (
		rate   = 10
		period = 500 * time.Millisecond
		jobs   = 50
	)
	env := newClientEnv(t, b)
	var cc concurrency
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[flowArgs](func(ctx context.Context, j *leasehold.Job[flowArgs]) error {
		return cc.work(ctx, j.ID, time.Millisecond)
	}))
	cfg := leasehold.Config{Workers: workers, Queues: map[string]leasehold.QueueConfig{
		leasehold.DefaultQueue: {MaxWorkers: 20, RateLimit: &leasehold.RateLimit{Limit: rate, Period: period}},
	}}
	a := env.client(nil, cfg)
	env.client(nil, cfg)
	params := make([]leasehold.InsertManyParams, jobs)
	for i := range params {
		params[i] = leasehold.InsertManyParams{Args: flowArgs{N: i}}
	}
	if _, err := a.InsertManyFast(context.Background(), params); err != nil {
		t.Fatalf("InsertManyFast: %v", err)
	}
	waitFor(t, 30*time.Second, func() bool { return cc.done.Load() >= jobs }, func() string {
		return fmt.Sprintf("%d of %d jobs done", cc.done.Load(), jobs)
	})
	rows, err := env.exec.JobList(context.Background(), &driver.JobListParams{Limit: jobs})
	if err != nil {
		t.Fatalf("JobList: %v", err)
	}
	var starts []time.Time
	for _, r := range rows {
		if r.LeasedAt == nil {
			t.Fatalf("job %d has no lease time", r.ID)
		}
		starts = append(starts, *r.LeasedAt)
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	// Fixed windows allow up to twice the limit across a boundary; never more.
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && starts[j].Sub(starts[i]) < period; j++ {
			n++
		}
		if n > 2*rate {
			t.Fatalf("%d jobs started within %s from %s: rate limit %d per %s exceeded beyond one period's tolerance", n, period, starts[i].Format(time.RFC3339Nano), rate, period)
		}
	}
	// 50 starts at 10 per window need at least 5 windows. The first start
	// may fall anywhere in its window and the last at the start of the fifth,
	// so more than 3 full periods lie between them.
	if spread, least := starts[len(starts)-1].Sub(starts[0]), (jobs/rate-2)*period; spread < least {
		t.Fatalf("%d jobs started within %s; a rate of %d per %s needs more than %s", jobs, spread, rate, period, least)
	}
}
