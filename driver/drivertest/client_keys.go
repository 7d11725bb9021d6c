package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// keysFullScale runs the per-key tests at the figures of issue 18's Proof
// (4 clients × 50 workers, 2,000 jobs over 50 keys; 20 sequences × 50 jobs;
// a backlog of 10,000 against 20 keys × 10). The default scales them down
// so that each test takes seconds on a small shared machine.
const keysFullScale = false

// keyArgs is a job with a customer (its key) and a sequence.
type keyArgs struct {
	Customer string `json:"customer"`
	Seq      string `json:"seq,omitempty"`
	N        int    `json:"n"`
}

func (keyArgs) Kind() string { return "drivertest_keyed" }

// perKey counts handlers running now per key and the most seen at once.
type perKey struct {
	mu      sync.Mutex
	now     map[string]int
	peak    map[string]int
	done    atomic.Int64
	started atomic.Int64
}

func newPerKey() *perKey { return &perKey{now: map[string]int{}, peak: map[string]int{}} }

func (p *perKey) enter(key string) {
	p.started.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[key]++
	p.peak[key] = max(p.peak[key], p.now[key])
}

func (p *perKey) leave(key string) {
	p.mu.Lock()
	p.now[key]--
	p.mu.Unlock()
	p.done.Add(1)
}

// maxPeak returns the highest per-key peak.
func (p *perKey) maxPeak() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := 0
	for _, v := range p.peak {
		m = max(m, v)
	}
	return m
}

// runningByKey samples the database: running jobs with a live lease, per key.
func runningByKey(ctx context.Context, exec driver.Executor) (map[string]int, error) {
	rows, err := exec.JobList(ctx, &driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateRunning}, Limit: 10000})
	if err != nil {
		return nil, err
	}
	// The clock is read after the rows: every lease counted was taken
	// before the rows were read and still live after, so they were all live
	// at once. Read before, it counted a lease that expired in between as
	// live beside the claim that rightly took its slot.
	now, err := exec.Now(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range rows {
		if r.Key != "" && r.LeaseUntil != nil && r.LeaseUntil.After(now) {
			out[r.Key]++
		}
	}
	return out, nil
}

// waitCompleted waits until n jobs are completed.
func waitCompleted(t *testing.T, exec driver.Executor, n int64, timeout time.Duration) {
	t.Helper()
	var got int64
	waitFor(t, timeout, func() bool {
		counts, err := exec.JobCountByState(context.Background())
		if err != nil {
			return false
		}
		got = 0
		for _, c := range counts {
			if c.State == leasetype.JobStateCompleted {
				got += c.Count
			}
		}
		return got >= n
	}, func() string { return fmt.Sprintf("%d of %d jobs completed", got, n) })
}

// testClientKeyLimit: a queue's per-key limit (1, then 3) holds across
// several clients, each with many workers, over many keys, while one client
// is cut off mid-run: never more than the limit running per key, in the
// handlers or in the database, and the limit is reached.
func testClientKeyLimit[TTx any](t *testing.T, b Backend[TTx]) {
	clients, workersPer, jobs, keys := 3, 20, 300, 10
	if keysFullScale {
		clients, workersPer, jobs, keys = 4, 50, 2000, 50
	}
	runHeavy(t)
	for _, limit := range []int{1, 3} {
		t.Run(fmt.Sprintf("limit%d", limit), func(t *testing.T) {
			env := newClientEnv(t, b)
			ctx := context.Background()
			pk := newPerKey()
			// Long enough that the jobs of one key claimed by different
			// clients overlap even when the claims queue for SQLite's one
			// writer on a loaded machine: the limit must be reached.
			hold := 40 * time.Millisecond * time.Duration(limit*limit)
			workers := leasehold.NewWorkers()
			leasehold.AddWorkerWithOpts(workers, leasehold.WorkFunc[keyArgs](func(ctx context.Context, j *leasehold.Job[keyArgs]) error {
				pk.enter(j.Key)
				defer pk.leave(j.Key)
				select {
				case <-time.After(hold):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}), &leasehold.WorkerOpts{KeyBy: []string{"customer"}})
			cfg := func(id string) leasehold.Config {
				return leasehold.Config{
					ID: id, LeaseTTL: time.Second, Workers: workers,
					Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: workersPer, KeyLimit: limit}},
				}
			}
			fd := newFaultDriver(env.d)
			victim := env.client(fd, cfg("victim"))
			for i := range clients - 1 {
				env.client(nil, cfg(fmt.Sprintf("survivor-%d", i)))
			}

			var (
				dbPeak  atomic.Int64
				stop    = make(chan struct{})
				sampled = make(chan struct{})
			)
			go func() {
				defer close(sampled)
				for {
					select {
					case <-stop:
						return
					case <-time.After(10 * time.Millisecond):
					}
					byKey, err := runningByKey(ctx, env.exec)
					if err != nil {
						continue
					}
					for _, n := range byKey {
						if int64(n) > dbPeak.Load() {
							dbPeak.Store(int64(n))
						}
					}
				}
			}()

			// A key that KeyBy cannot derive is refused at insert.
			if _, err := victim.Insert(ctx, keyArgs{N: -1}, nil); !errors.Is(err, leasehold.ErrInvalidArgs) {
				t.Fatalf("insert with an empty KeyBy value: %v, want ErrInvalidArgs", err)
			}
			params := make([]leasehold.InsertManyParams, jobs)
			for i := range params {
				params[i] = leasehold.InsertManyParams{Args: keyArgs{Customer: fmt.Sprintf("c%02d", i%keys), N: i}}
			}
			if _, err := victim.InsertManyFast(ctx, params); err != nil {
				t.Fatalf("InsertManyFast: %v", err)
			}
			waitFor(t, 120*time.Second, func() bool { return pk.done.Load() >= int64(jobs/3) }, func() string {
				return fmt.Sprintf("%d of %d jobs done before the kill", pk.done.Load(), jobs)
			})
			fd.set(faultPartition)
			waitCompleted(t, env.exec, int64(jobs), 300*time.Second)
			close(stop)
			<-sampled

			if p := pk.maxPeak(); p > limit {
				t.Fatalf("%d handlers of one key ran at once, key limit %d", p, limit)
			}
			if p := dbPeak.Load(); p > int64(limit) {
				t.Fatalf("the database showed %d running jobs of one key with live leases, key limit %d", p, limit)
			}
			if p := pk.maxPeak(); p < limit {
				t.Fatalf("at most %d handlers of one key ran at once: the key limit %d was never reached, so the test proves nothing", p, limit)
			}
			t.Logf("%d jobs over %d keys, per-key peak %d handlers / %d live leases (limit %d)", jobs, keys, pk.maxPeak(), dbPeak.Load(), limit)
		})
	}
}

// testClientFairness: one key's large backlog, inserted first, does not
// starve twenty small keys: with a fair queue every small key's jobs start
// within the first rounds of the round-robin, long before the backlog is
// worked off.
func testClientFairness[TTx any](t *testing.T, b Backend[TTx]) {
	big, small, perSmall := 1000, 20, 10
	if keysFullScale {
		big = 10000
	}
	env := newClientEnv(t, b)
	ctx := context.Background()
	inserter := env.client(nil, leasehold.Config{})
	params := make([]leasehold.InsertManyParams, 0, big+small*perSmall)
	for i := range big {
		params = append(params, leasehold.InsertManyParams{Args: keyArgs{N: i}, InsertOpts: &leasehold.InsertOpts{Key: "big"}})
	}
	for i := range small * perSmall {
		params = append(params, leasehold.InsertManyParams{Args: keyArgs{N: big + i}, InsertOpts: &leasehold.InsertOpts{Key: fmt.Sprintf("small-%02d", i%small)}})
	}
	if _, err := inserter.InsertManyFast(ctx, params); err != nil {
		t.Fatalf("InsertManyFast: %v", err)
	}

	var (
		mu    sync.Mutex
		order []string // keys in start order
	)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[keyArgs](func(ctx context.Context, j *leasehold.Job[keyArgs]) error {
		mu.Lock()
		order = append(order, j.Key)
		mu.Unlock()
		select {
		case <-time.After(5 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	env.client(nil, leasehold.Config{Workers: workers,
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: 10, Fair: true}}})
	waitFor(t, 120*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range order {
			if k != "big" {
				n++
			}
		}
		return n == small*perSmall
	}, func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d jobs started, not every small key's job yet", len(order))
	})
	mu.Lock()
	defer mu.Unlock()
	// Round-robin by running jobs: a key with a job running ranks behind
	// the keys with none, and on a tie the oldest job (the big key's) goes
	// first, so the big key runs about one job at a time while the small
	// keys share the other workers. After perSmall rounds of small+1 keys
	// every small job would have started; allow half as much again for
	// that tie-break and claims in flight. Without fairness the small keys
	// start after the whole backlog.
	bound := (small + 1) * perSmall * 3 / 2
	last := -1
	for i, k := range order {
		if k != "big" {
			last = i
		}
	}
	if last >= bound {
		t.Fatalf("the last small-key job started %d-th, want within the first %d (round-robin across %d keys); the big backlog starved the small keys", last+1, bound, small+1)
	}
	t.Logf("%d-job backlog: every small-key job started within the first %d starts", big, last+1)

	// The key is stored and filterable.
	listed, err := inserter.JobList(ctx, &leasehold.JobListParams{Key: "small-03"})
	if err != nil {
		t.Fatalf("JobList by key: %v", err)
	}
	if len(listed) != perSmall {
		t.Fatalf("JobList by key small-03: %d jobs, want %d", len(listed), perSmall)
	}
	for _, j := range listed {
		if j.Key != "small-03" {
			t.Fatalf("JobList by key small-03 returned job %d with key %q", j.ID, j.Key)
		}
	}
}

// testClientSequence: jobs with the same sequence key, inserted interleaved
// by two clients, run one after another in insert order and never overlap,
// across a retried head (some jobs fail once) and a holder cut off while it
// runs.
func testClientSequence[TTx any](t *testing.T, b Backend[TTx]) {
	seqs, perSeq := 8, 15
	if keysFullScale {
		seqs, perSeq = 20, 50
	}
	runHeavy(t)
	env := newClientEnv(t, b)
	type run struct {
		n             int
		start, finish time.Time
	}
	var (
		mu    sync.Mutex
		runs  = map[string][]run{}
		tries sync.Map // N → attempts
		done  atomic.Int64
	)
	workers := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(workers, leasehold.WorkFunc[keyArgs](func(ctx context.Context, j *leasehold.Job[keyArgs]) error {
		r := run{n: j.Args.N, start: time.Now()}
		v, _ := tries.LoadOrStore(j.Args.N, new(atomic.Int64))
		try := v.(*atomic.Int64).Add(1)
		var err error
		if j.Args.N < 0 {
			// The blocking job below: discarded at its first run.
			return leasehold.Permanent(fmt.Errorf("job %d fails for good", j.Args.N))
		}
		select {
		case <-time.After(2 * time.Millisecond):
			if j.Args.N%7 == 3 && try == 1 {
				err = fmt.Errorf("first attempt of job %d fails", j.Args.N)
			}
		case <-ctx.Done():
			err = ctx.Err()
		}
		r.finish = time.Now()
		mu.Lock()
		runs[j.Sequence] = append(runs[j.Sequence], r)
		mu.Unlock()
		if err == nil {
			done.Add(1)
		}
		return err
	}), &leasehold.WorkerOpts{SequenceBy: []string{"seq"}})
	cfg := func(id string) leasehold.Config {
		return leasehold.Config{ID: id, LeaseTTL: time.Second, Workers: workers,
			Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: 20}}}
	}
	// Interleaved: two clients take turns, each insert its own
	// transaction, before the workers start, so that a claim sees many
	// jobs of each sequence at once. Their SequenceBy comes from the
	// registry they are given.
	inserters := []*leasehold.Client[TTx]{
		env.client(nil, leasehold.Config{Workers: nil}), env.client(nil, leasehold.Config{Workers: nil}),
	}
	total := seqs * perSeq
	for i := range total {
		opts := &leasehold.InsertOpts{Sequence: fmt.Sprintf("s%02d", i%seqs)}
		insert(t, inserters[i%2], keyArgs{N: i}, opts)
	}
	fd := newFaultDriver(env.d)
	env.client(fd, cfg("victim"))
	env.client(nil, cfg("survivor"))
	waitFor(t, 120*time.Second, func() bool { return done.Load() >= int64(total/3) }, func() string {
		return fmt.Sprintf("%d of %d jobs done before the cut", done.Load(), total)
	})
	fd.set(faultPartition)
	waitCompleted(t, env.exec, int64(total), 300*time.Second)

	// A discarded job blocks its sequence (SequenceBlock, the default):
	// the job after it does not start, and the sequence is listed.
	head := insert(t, inserters[0], keyArgs{N: -1}, &leasehold.InsertOpts{Sequence: "blocked"})
	next := insert(t, inserters[1], keyArgs{N: total}, &leasehold.InsertOpts{Sequence: "blocked"})
	env.waitState(head.ID, leasetype.JobStateDiscarded, 60*time.Second)
	time.Sleep(300 * time.Millisecond) // several poll intervals
	if j := env.job(next.ID); j.State != leasetype.JobStateAvailable {
		t.Fatalf("the job after a discarded one is %s, want available (blocked)", j.State)
	}
	blocked, err := inserters[0].SequencesBlocked(context.Background(), nil)
	if err != nil {
		t.Fatalf("SequencesBlocked: %v", err)
	}
	if len(blocked) != 1 || blocked[0].Sequence != "blocked" || blocked[0].Job.ID != head.ID || blocked[0].Waiting != 1 {
		t.Fatalf("SequencesBlocked = %+v, want sequence blocked by job %d with 1 waiting", blocked, head.ID)
	}

	mu.Lock()
	defer mu.Unlock()
	retried := 0
	for seq, rs := range runs {
		sort.Slice(rs, func(i, k int) bool { return rs[i].start.Before(rs[k].start) })
		for i := 1; i < len(rs); i++ {
			prev, cur := rs[i-1], rs[i]
			if cur.start.Before(prev.finish) {
				t.Fatalf("sequence %s: job %d started before job %d finished: the runs overlap", seq, cur.n, prev.n)
			}
			if cur.n < prev.n {
				t.Fatalf("sequence %s: job %d ran after job %d: not in insert order", seq, cur.n, prev.n)
			}
			if cur.n == prev.n {
				retried++
			}
		}
	}
	if retried == 0 {
		t.Fatalf("no job ran twice: the retried head was never exercised")
	}
	t.Logf("%d sequences × %d jobs in order, %d re-runs of a head", seqs, perSeq, retried)
}

// testClientKeyRateLimit: a queue's per-key rate limit of 3 starts per
// 400 ms holds across two clients: per key, no span of one period holds
// more than two windows' worth (fixed windows), and each key's jobs are
// spread over the periods their count needs, while other keys go on.
func testClientKeyRateLimit[TTx any](t *testing.T, b Backend[TTx]) {
	const (
		rate   = 3
		period = 400 * time.Millisecond
		keys   = 4
		perKey = 9
	)
	env := newClientEnv(t, b)
	ctx := context.Background()
	var (
		mu     sync.Mutex
		starts = map[string][]time.Time{}
		done   atomic.Int64
	)
	workers := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(workers, leasehold.WorkFunc[keyArgs](func(ctx context.Context, j *leasehold.Job[keyArgs]) error {
		mu.Lock()
		starts[j.Key] = append(starts[j.Key], *j.LeasedAt)
		mu.Unlock()
		done.Add(1)
		return nil
	}), &leasehold.WorkerOpts{KeyBy: []string{"customer"}})
	cfg := leasehold.Config{Workers: workers, Queues: map[string]leasehold.QueueConfig{
		leasehold.DefaultQueue: {MaxWorkers: 20, KeyRateLimit: &leasehold.RateLimit{Limit: rate, Period: period}}}}
	a := env.client(nil, cfg)
	env.client(nil, cfg)
	params := make([]leasehold.InsertManyParams, 0, keys*perKey)
	for i := range keys * perKey {
		params = append(params, leasehold.InsertManyParams{Args: keyArgs{Customer: fmt.Sprintf("m%d", i%keys), N: i}})
	}
	if _, err := a.InsertMany(ctx, params); err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	waitFor(t, 60*time.Second, func() bool { return done.Load() >= keys*perKey }, func() string {
		return fmt.Sprintf("%d of %d jobs started", done.Load(), keys*perKey)
	})
	mu.Lock()
	defer mu.Unlock()
	for key, ts := range starts {
		slices.SortFunc(ts, func(x, y time.Time) int { return x.Compare(y) })
		// Fixed windows: at most rate in each, so at most 2×rate in any
		// span shorter than a period (the end of one window and the start
		// of the next).
		for i := 0; i+2*rate < len(ts); i++ {
			if d := ts[i+2*rate].Sub(ts[i]); d < period {
				t.Fatalf("key %s: %d starts within %s, want at most %d per %s", key, 2*rate+1, d, rate, period)
			}
		}
		// perKey starts need at least perKey/rate windows: the first and
		// last are at least (perKey/rate - 1) periods apart, less one
		// window's partial start.
		if span, want := ts[len(ts)-1].Sub(ts[0]), time.Duration(perKey/rate-2)*period; span < want {
			t.Fatalf("key %s: %d starts spread over %s, want at least %s at %d per %s", key, len(ts), span, want, rate, period)
		}
	}
	if len(starts) != keys {
		t.Fatalf("%d keys started jobs, want %d", len(starts), keys)
	}
}

// testClientKeyStats checks Client.KeyStats: the top keys by waiting jobs
// with their running counts, the limit and the queue filter, and the
// per-queue summary (distinct keys, waiting jobs, histogram buckets).
func testClientKeyStats[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	c := env.client(nil, leasehold.Config{})
	n := 0
	add := func(queue, key string, count int) {
		for range count {
			n++
			insert(t, c, keyArgs{N: n}, &leasehold.InsertOpts{Queue: queue, Key: key})
		}
	}
	add("ks_a", "big", 12)
	add("ks_a", "mid", 3)
	add("ks_a", "one", 1)
	add("ks_a", "", 4) // no key: not counted
	add("ks_b", "x", 3)
	claimed, err := env.exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "ks_b", Max: 1, Owner: "keystats", DefaultLeaseTTL: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("JobClaim: %d jobs, %v", len(claimed), err)
	}

	res, err := c.KeyStats(ctx, &leasehold.KeyStatsParams{Limit: 3})
	if err != nil {
		t.Fatalf("KeyStats: %v", err)
	}
	got := make([]string, 0, len(res.Top))
	for _, r := range res.Top {
		got = append(got, fmt.Sprintf("%s/%s:%d/%d", r.Queue, r.Key, r.Waiting, r.Running))
	}
	if want := "[ks_a/big:12/0 ks_a/mid:3/0 ks_b/x:2/1]"; fmt.Sprint(got) != want {
		t.Errorf("top keys (queue/key:waiting/running) = %v, want %s", got, want)
	}
	if len(res.Queues) != 2 {
		t.Fatalf("queue summaries = %d, want 2 (%+v)", len(res.Queues), res.Queues)
	}
	a, bq := res.Queues[0], res.Queues[1]
	if a.Queue != "ks_a" || a.Keys != 3 || a.Waiting != 16 || a.MaxWaiting != 12 {
		t.Errorf("ks_a summary = %+v, want 3 keys, 16 waiting, max 12", a)
	}
	// Bounds 1, 10, 100, ...: "one" ≤ 1; "mid" ≤ 10; "big" ≤ 100.
	if want := "[1 2 3 3 3]"; fmt.Sprint(a.WaitingBuckets) != want {
		t.Errorf("ks_a buckets = %v, want %s", a.WaitingBuckets, want)
	}
	if bq.Queue != "ks_b" || bq.Keys != 1 || bq.Waiting != 2 || bq.MaxWaiting != 2 {
		t.Errorf("ks_b summary = %+v, want 1 key, 2 waiting, max 2", bq)
	}

	res, err = c.KeyStats(ctx, &leasehold.KeyStatsParams{Queue: "ks_b"})
	if err != nil {
		t.Fatalf("KeyStats(queue): %v", err)
	}
	if len(res.Top) != 1 || res.Top[0].Key != "x" || len(res.Queues) != 1 || res.Queues[0].Queue != "ks_b" {
		t.Errorf("KeyStats(ks_b) = top %+v, queues %+v; want key x of ks_b alone", res.Top, res.Queues)
	}
	res, err = c.KeyStats(ctx, &leasehold.KeyStatsParams{Queue: "ks_none"})
	if err != nil || res.Top == nil || len(res.Top) != 0 || res.Queues == nil || len(res.Queues) != 0 {
		t.Errorf("KeyStats(no such queue) = %+v, %v; want empty, non-nil lists", res, err)
	}
	if _, err := c.KeyStats(ctx, &leasehold.KeyStatsParams{Limit: -1}); !errors.Is(err, leasehold.ErrInvalidArgs) {
		t.Errorf("KeyStats(limit -1) = %v, want ErrInvalidArgs", err)
	}
}
