package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientHeartbeats: jobs running for several TTLs keep their leases
// through automatic renewals, sent as one batched statement per tick for all
// of the client's jobs rather than one per job.
func testClientHeartbeats[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	const jobs = 20
	ttl := time.Second
	run := 3 * ttl
	fd := newFaultDriver(env.d)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		select {
		case <-time.After(run):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	c := env.client(fd, leasehold.Config{LeaseTTL: ttl, Workers: w})
	params := make([]leasehold.InsertManyParams, jobs)
	for i := range params {
		params[i] = leasehold.InsertManyParams{Args: testArgs{Name: "long"}}
	}
	res, err := c.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		row := env.waitState(r.Job.ID, leasetype.JobStateCompleted, 10*time.Second)
		if row.Expiries != 0 || row.Attempt != 1 {
			t.Fatalf("job %d: expiries %d attempt %d; want 0, 1", row.ID, row.Expiries, row.Attempt)
		}
		a := env.attempts(row.ID)
		if len(a) != 1 || a[0].Heartbeats < 2 || a[0].LastHeartbeatAt == nil {
			t.Fatalf("job %d attempts = %+v, want one with at least 2 heartbeats", row.ID, a)
		}
	}
	calls, renewals := fd.heartbeats.Load(), fd.renewals.Load()
	if calls == 0 || renewals < jobs*2 {
		t.Fatalf("heartbeat statements %d carrying %d renewals; want at least %d renewals", calls, renewals, jobs*2)
	}
	if float64(renewals)/float64(calls) < jobs/4 {
		t.Fatalf("heartbeat statements %d for %d renewals: renewals are not batched", calls, renewals)
	}
	// The counters follow the database writes by a moment.
	waitFor(t, 5*time.Second, func() bool { return c.Stats().Completed == jobs }, func() string { return "completions not counted" })
	if s := c.Stats(); s.LeasesLost != 0 || s.Expired != 0 {
		t.Fatalf("stats = %+v, want no lease lost or expired", s)
	}
}

// testClientDatabaseOutage: the database goes away for less than a TTL while
// jobs run; handlers keep running, the client reconnects, nothing is lost.
func testClientDatabaseOutage[TTx any](t *testing.T, b Backend[TTx]) {
	for _, mode := range []faultMode{faultPartition, faultBlackhole} {
		t.Run(map[faultMode]string{faultPartition: "Refused", faultBlackhole: "Blackhole"}[mode], func(t *testing.T) {
			t.Parallel()
			env := newClientEnv(t, b)
			ttl := 3 * time.Second
			fd := newFaultDriver(env.d)
			w := newBlockWorker(t, false)
			c := env.client(fd, leasehold.Config{LeaseTTL: ttl, Workers: workersFor(w, nil)})
			var ids []int64
			for range 3 {
				ids = append(ids, insert(t, c, blockArgs{Name: "outage"}, nil).ID)
			}
			for range ids {
				recvJob(t, w.started, 5*time.Second)
			}
			fd.set(mode)
			time.Sleep(ttl / 2)
			fd.set(faultNone)
			w.releaseAll()
			for _, id := range ids {
				row := env.waitState(id, leasetype.JobStateCompleted, 10*time.Second)
				if row.Attempt != 1 || row.Expiries != 0 {
					t.Fatalf("job %d: attempt %d expiries %d after a short outage; want 1, 0", id, row.Attempt, row.Expiries)
				}
			}
			// New work is claimed after the outage.
			after := insert(t, c, blockArgs{Name: "after"}, nil)
			env.waitState(after.ID, leasetype.JobStateCompleted, 5*time.Second)
		})
	}
}

// testClientStartUnreachable: Start fails with a clear error when the
// database cannot be reached.
func testClientStartUnreachable[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	fd := newFaultDriver(env.d)
	fd.set(faultPartition)
	c, err := leasehold.NewClient[TTx](fd, testConfig(leasehold.Config{Workers: workersFor(newBlockWorker(t, false), nil)}))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "reach database") || !errors.Is(err, errInjected) {
		t.Fatalf("Start on an unreachable database = %v, want a 'reach database' error wrapping the cause", err)
	}
}

// testClientBadInput: invalid jobs get a clear error and write nothing.
func testClientBadInput[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	c := env.client(nil, leasehold.Config{MaxArgsBytes: 1024})
	ctx := context.Background()
	cases := []struct {
		name string
		args leasehold.JobArgs
		opts *leasehold.InsertOpts
		want string
	}{
		{"empty kind", kindArgs(""), nil, "kind is empty"},
		{"long kind", kindArgs(strings.Repeat("k", 129)), nil, "max 128"},
		{"bad kind char", kindArgs("pay ment"), nil, "invalid character"},
		{"bad queue", testArgs{}, &leasehold.InsertOpts{Queue: "q;drop"}, "invalid character"},
		{"long queue", testArgs{}, &leasehold.InsertOpts{Queue: strings.Repeat("q", 200)}, "max 128"},
		{"priority", testArgs{}, &leasehold.InsertOpts{Priority: 9}, "priority 9"},
		{"max attempts", testArgs{}, &leasehold.InsertOpts{MaxAttempts: -1}, "max attempts -1"},
		{"max attempts past 32 bits", testArgs{}, &leasehold.InsertOpts{MaxAttempts: 1 << 31}, "max attempts 2147483648 is outside 1 to 2147483647"},
		{"lease ttl", testArgs{}, &leasehold.InsertOpts{LeaseTTL: time.Millisecond}, "lease TTL"},
		{"lease ttl too long", testArgs{}, &leasehold.InsertOpts{LeaseTTL: 48 * time.Hour}, "above the maximum 24h0m0s"},
		{"non-ASCII queue", testArgs{}, &leasehold.InsertOpts{Queue: "zürich"}, `invalid character 'ü' at byte 1 (allowed: ASCII letters`},
		{"lone surrogate in args", rawJSONArgs(`{"name":"\ud800"}`), nil, "lone UTF-16 surrogate"},
		{"oversized args", testArgs{Name: strings.Repeat("x", 2000)}, nil, "bytes encoded (max 1024)"},
		{"unmarshalable args", chanArgs{C: make(chan int)}, nil, "marshal args"},
		{"unique key control char", testArgs{}, &leasehold.InsertOpts{UniqueKey: "a\nb"}, "control character"},
		{"unique key not UTF-8", testArgs{}, &leasehold.InsertOpts{UniqueKey: "\xff\xfe"}, "not valid UTF-8"},
		{"NUL in args", testArgs{Name: "a\x00b"}, nil, "NUL character"},
		{"NUL in metadata", testArgs{}, &leasehold.InsertOpts{Metadata: map[string]any{"k": "\x00"}}, "NUL character"},
		{"nil args", nil, nil, "args are nil"},
	}
	for _, tc := range cases {
		_, err := c.Insert(ctx, tc.args, tc.opts)
		if !errors.Is(err, leasehold.ErrInvalidArgs) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Insert = %v, want ErrInvalidArgs containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := c.InsertManyFast(ctx, []leasehold.InsertManyParams{{Args: testArgs{}, InsertOpts: &leasehold.InsertOpts{UniqueKey: "k"}}}); !errors.Is(err, leasehold.ErrInvalidArgs) {
		t.Errorf("InsertManyFast with a unique key = %v, want ErrInvalidArgs", err)
	}
	rows, err := env.exec.JobList(ctx, &driver.JobListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 0 {
		t.Fatalf("bad inserts wrote %d jobs", len(rows))
	}
	if _, err := leasehold.NewClient[TTx](env.d, &leasehold.Config{LeaseTTL: time.Millisecond}); !errors.Is(err, leasehold.ErrInvalidConfig) {
		t.Errorf("NewClient with a 1 ms TTL = %v, want ErrInvalidConfig", err)
	}
	if _, err := c.JobGet(ctx, 424242); !errors.Is(err, leasehold.ErrNotFound) {
		t.Errorf("JobGet of a missing ID = %v, want ErrNotFound", err)
	}
	if _, err := c.JobRetry(ctx, 424242); !errors.Is(err, leasehold.ErrNotFound) {
		t.Errorf("JobRetry of a missing ID = %v, want ErrNotFound", err)
	}

	// Arguments are stored as given, without HTML escapes, and the size
	// limit counts what is stored: 900 bytes of <&> fit in 1,024.
	html := strings.Repeat("<&>", 300)
	res, err := c.Insert(ctx, testArgs{Name: html}, nil)
	if err != nil {
		t.Fatalf("Insert of <&> args within the limit: %v", err)
	}
	row, err := c.JobGet(ctx, res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(row.EncodedArgs, []byte(`\u003c`)) || !bytes.Contains(row.EncodedArgs, []byte(html)) {
		t.Errorf("stored args %.80s..., want the <&> characters as given", row.EncodedArgs)
	}
}

// rawJSONArgs are arguments given as JSON text.
type rawJSONArgs string

func (rawJSONArgs) Kind() string { return "drivertest_raw" }

// MarshalJSON returns the text as it is.
func (r rawJSONArgs) MarshalJSON() ([]byte, error) { return []byte(r), nil }

type kindArgs string

func (k kindArgs) Kind() string { return string(k) }

type chanArgs struct{ C chan int }

func (chanArgs) Kind() string { return "drivertest_chan" }

// testClientUniqueInsert: concurrent inserts with one unique key through
// clients insert one job; each caller learns whether it inserted.
func testClientUniqueInsert[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	c := env.client(nil, leasehold.Config{})
	var (
		mu       sync.Mutex
		inserted int
		ids      = map[int64]bool{}
		wg       sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Insert(context.Background(), testArgs{Name: "pay"}, &leasehold.InsertOpts{UniqueKey: "payment-42"})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[res.Job.ID] = true
			if !res.UniqueSkipped {
				inserted++
			}
		}()
	}
	wg.Wait()
	if inserted != 1 || len(ids) != 1 {
		t.Fatalf("16 concurrent unique inserts: %d inserted, %d distinct IDs; want 1, 1", inserted, len(ids))
	}
}

// testClientWakeups: with polling slowed to a minute, a job inserted through
// the working client starts at once (in-process wake-up), and on a backend
// that can push notifications, so does one inserted by another client.
func testClientWakeups[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := newBlockWorker(t, false)
	w.releaseAll()
	worker := env.client(nil, leasehold.Config{PollInterval: time.Minute, Workers: workersFor(w, nil)})
	// Let the first poll pass, so only a wake-up can start the next jobs.
	time.Sleep(200 * time.Millisecond)

	local := insert(t, worker, blockArgs{Name: "local"}, nil)
	env.waitState(local.ID, leasetype.JobStateCompleted, 5*time.Second)

	if _, ok := driver.NotifierOf(env.d); !ok {
		return
	}
	other := env.client(nil, leasehold.Config{})
	remote := insert(t, other, blockArgs{Name: "remote"}, nil)
	env.waitState(remote.ID, leasetype.JobStateCompleted, 5*time.Second)
}

// testClientOwnInsertClaimsOnce: a job inserted through the client that
// works its queue costs one claim. The client wakes its producer itself
// after the insert; on a backend that pushes notifications, the
// notification of the same insert must not start a second claim, which
// would find nothing.
func testClientOwnInsertClaimsOnce[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := newBlockWorker(t, false)
	w.releaseAll()
	counted, claims := countClaims(env.d)
	// A queue of this test's own: insert notifications are database-wide on
	// Postgres, and another test's insert into a queue of the same name
	// would rightly wake this client.
	queue := fmt.Sprintf("own_%d", time.Now().UnixNano())
	worker := env.client(counted, leasehold.Config{PollInterval: time.Minute, Workers: workersFor(w, nil),
		Queues: map[string]leasehold.QueueConfig{queue: {MaxWorkers: 10}}})
	time.Sleep(200 * time.Millisecond) // the first poll
	before := claims.Load()
	const jobs = 30
	for i := range jobs {
		job := insert(t, worker, blockArgs{Name: fmt.Sprintf("own-%d", i)}, &leasehold.InsertOpts{Queue: queue})
		env.waitState(job.ID, leasetype.JobStateCompleted, 5*time.Second)
	}
	time.Sleep(300 * time.Millisecond) // for late notifications to claim
	if claims := claims.Load() - before; claims > jobs+jobs/10 {
		t.Fatalf("%d claims for %d jobs inserted one at a time through the working client, want at most %d",
			claims, jobs, jobs+jobs/10)
	}
}

// orderArgs is a job that records when it started among the others.
type orderArgs struct {
	N int `json:"n"`
}

func (orderArgs) Kind() string { return "drivertest_order" }

// testClientHeadJobDuringBacklog: while a client works through a backlog, a
// job inserted with a claim position before the backlog's (a scheduled
// time in the past) runs soon, not after the backlog. A claim that
// continues a backlog may start where the previous one ended
// (driver.JobClaimParams.After). Another client's insert reaches the
// worker as a notification that names only the queue, and its claims
// return to the head at least once per poll interval (300 ms here); the
// working client's own insert sends its next claim back to the head at
// once. The backlog takes about two seconds (5 workers, 5 ms per job);
// each job must run within the next quarter of it.
func testClientHeadJobDuringBacklog[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	const backlog = 2000
	other := env.client(nil, leasehold.Config{})
	batch := make([]leasehold.InsertManyParams, backlog)
	for i := range batch {
		batch[i] = leasehold.InsertManyParams{Args: orderArgs{N: i}}
	}
	if _, err := other.InsertManyFast(ctx, batch); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		starts []int
	)
	started := func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Index(starts, n)
	}
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[orderArgs](func(ctx context.Context, j *leasehold.Job[orderArgs]) error {
		mu.Lock()
		starts = append(starts, j.Args.N)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		return nil
	}))
	worker := env.client(nil, leasehold.Config{PollInterval: 300 * time.Millisecond, Workers: w,
		Queues: map[string]leasehold.QueueConfig{leasehold.DefaultQueue: {MaxWorkers: 5}}})
	waitFor(t, 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(starts) >= 50 },
		func() string { return "the backlog did not start" })

	// One at a time, so that the claim that takes the first cannot take the
	// second: each is the only job before the cursor when it is inserted.
	for i, ins := range []struct {
		n      int
		client *leasehold.Client[TTx]
	}{{-1, other}, {-2, worker}} {
		if started(backlog-1) >= 0 {
			t.Fatalf("the backlog ended before job %d was inserted", ins.n)
		}
		mu.Lock()
		before := len(starts)
		mu.Unlock()
		past := time.Now().Add(-time.Duration(i+1) * time.Hour)
		if _, err := ins.client.Insert(ctx, orderArgs{N: ins.n}, &leasehold.InsertOpts{ScheduledAt: past}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, func() bool { return started(ins.n) >= 0 },
			func() string { return fmt.Sprintf("job %d inserted during the backlog did not start", ins.n) })
		if at := started(ins.n); at > before+backlog/4 {
			t.Errorf("job %d, inserted after %d of %d backlog jobs had started, ran as start %d", ins.n, before, backlog, at)
		}
	}
}

// testClientQueuePause: a queue paused through one client is claimed from by
// no client until resumed, then its jobs run within about a second.
func testClientQueuePause[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	w := newBlockWorker(t, false)
	w.releaseAll()
	admin := env.client(nil, leasehold.Config{})
	if err := admin.QueuePause(ctx, leasehold.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	worker := env.client(nil, leasehold.Config{PollInterval: time.Second, Workers: workersFor(w, nil)})
	job := insert(t, worker, blockArgs{Name: "paused"}, nil)
	time.Sleep(1500 * time.Millisecond) // more than a poll interval
	if row := env.job(job.ID); row.State != leasetype.JobStateAvailable {
		t.Fatalf("job in a paused queue is %s, want available", row.State)
	}
	queues, err := admin.QueueList(ctx)
	if err != nil || len(queues) != 1 || !queues[0].Paused {
		t.Fatalf("QueueList = %+v, %v; want default paused", queues, err)
	}
	resumed := time.Now()
	if err := admin.QueueResume(ctx, leasehold.DefaultQueue); err != nil {
		t.Fatal(err)
	}
	env.waitState(job.ID, leasetype.JobStateCompleted, 5*time.Second)
	// Within the worker's poll interval (1 s) when nothing wakes it, plus
	// generous room for a loaded test machine.
	if took := time.Since(resumed); took > 3*time.Second {
		t.Fatalf("job ran %s after resume, want within about the poll interval", took)
	}
	if err := admin.QueuePause(ctx, "bad queue"); err == nil {
		t.Fatal("pausing an invalid queue name succeeded")
	}
}

// testClientHeartbeatCoalescing: leases claimed at different moments share
// renewal statements: with jobs started over a whole TTL, the client sends
// far fewer statements than one per job per renewal period.
func testClientHeartbeatCoalescing[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	const jobs = 12
	ttl := 1200 * time.Millisecond
	fd := newFaultDriver(env.d)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		select {
		case <-time.After(3 * ttl):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}))
	c := env.client(fd, leasehold.Config{LeaseTTL: ttl, Workers: w})
	var ids []int64
	for range jobs {
		ids = append(ids, insert(t, c, testArgs{Name: "staggered"}, nil).ID)
		time.Sleep(ttl / jobs) // claims spread over one TTL
	}
	for _, id := range ids {
		env.waitState(id, leasetype.JobStateCompleted, 15*time.Second)
	}
	calls, renewals := fd.heartbeats.Load(), fd.renewals.Load()
	// Each job runs 3 TTLs and is renewed every TTL/6 to TTL/3: about 9 to
	// 18 renewals each. Uncoalesced, that is as many statements.
	if renewals < jobs*6 || calls*3 > renewals {
		t.Fatalf("%d heartbeat statements carried %d renewals for %d staggered jobs; want at least 3 renewals per statement", calls, renewals, jobs)
	}
}
