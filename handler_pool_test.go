package leasehold

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goid returns the current goroutine's id, from its stack header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	id, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return id
}

// waitUntil polls cond every millisecond for up to 10 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandlerPoolReusesGoroutine: a job handed to the pool while one of its
// goroutines waits runs on that goroutine, the most recently idle first.
func TestHandlerPoolReusesGoroutine(t *testing.T) {
	t.Parallel()
	hp := newHandlerPool()
	defer hp.close()
	ran := make(chan uint64, 1)
	work := func(*lease) { ran <- goid() }
	hp.run(&lease{}, work)
	first := <-ran
	waitUntil(t, "the goroutine to wait for a job", func() bool { return idleCount(hp) == 1 })
	hp.run(&lease{}, work)
	if second := <-ran; second != first {
		t.Fatalf("second job ran on goroutine %d, want the waiting goroutine %d", second, first)
	}
	if n := hp.live.Load(); n != 1 {
		t.Fatalf("pool has %d goroutines, want 1", n)
	}
}

func idleCount(hp *handlerPool) int {
	hp.mu.Lock()
	defer hp.mu.Unlock()
	return len(hp.idle)
}

// TestHandlerPoolBusyGetsNewGoroutine: jobs that arrive while every
// goroutine runs one each get a goroutine of their own, so none waits
// behind another.
func TestHandlerPoolBusyGetsNewGoroutine(t *testing.T) {
	t.Parallel()
	hp := newHandlerPool()
	defer hp.close()
	release := make(chan struct{})
	var mu sync.Mutex
	ids := map[uint64]bool{}
	var started sync.WaitGroup
	started.Add(3)
	work := func(*lease) {
		mu.Lock()
		ids[goid()] = true
		mu.Unlock()
		started.Done()
		<-release
	}
	for range 3 {
		hp.run(&lease{}, work)
	}
	started.Wait() // all three run at once: none queued behind another
	close(release)
	if len(ids) != 3 || hp.live.Load() != 3 {
		t.Fatalf("%d goroutines ran the jobs, pool has %d; want 3 and 3", len(ids), hp.live.Load())
	}
}

// TestHandlerPoolRunAllStartsEveryJob: a claim's jobs handed over together,
// more of them than goroutines wait and than one chunk holds, all run at
// once, the waiting goroutines taking the first of them and new ones the
// rest.
func TestHandlerPoolRunAllStartsEveryJob(t *testing.T) {
	t.Parallel()
	hp := newHandlerPool()
	defer hp.close()
	const waiting, jobs = 3, 2*handOffChunk + 5
	// The warm-up jobs (token 0) name their goroutine and wait for one
	// another, so that each has a goroutine of its own.
	first := make(chan uint64, waiting)
	warm := make(chan struct{})
	release := make(chan struct{})
	var (
		mu      sync.Mutex
		ids     = map[uint64]bool{}
		started sync.WaitGroup
	)
	work := func(l *lease) {
		if l.token == 0 {
			first <- goid()
			<-warm
			return
		}
		mu.Lock()
		ids[goid()] = true
		mu.Unlock()
		started.Done()
		<-release
	}
	for range waiting {
		hp.run(&lease{}, work)
	}
	idle := map[uint64]bool{}
	for range waiting {
		idle[<-first] = true
	}
	close(warm)
	waitUntil(t, "the goroutines to wait for jobs", func() bool { return idleCount(hp) == waiting })
	started.Add(jobs)
	ls := make([]*lease, jobs)
	for i := range ls {
		ls[i] = &lease{token: 1}
	}
	hp.runAll(ls, work)
	started.Wait() // all of them run at once: none queued behind another
	close(release)
	if len(ids) != jobs || hp.live.Load() != jobs {
		t.Fatalf("%d goroutines ran the %d jobs, pool has %d", len(ids), jobs, hp.live.Load())
	}
	for id := range idle {
		if !ids[id] {
			t.Errorf("waiting goroutine %d took no job", id)
		}
	}
}

// TestHandlerPoolShortJobsShareGoroutines: a burst of jobs that end at once
// runs each job once, on far fewer goroutines than jobs: a goroutine that
// ends a job takes the next one queued, and hands one on only while fewer
// than GOMAXPROCS goroutines handed one have yet to start it.
func TestHandlerPoolShortJobsShareGoroutines(t *testing.T) {
	t.Parallel()
	const jobs = 10000
	hp := runBurst(t, jobs, func() {})
	if n := hp.live.Load(); n > jobs/10 {
		t.Fatalf("%d jobs that end at once ran on %d goroutines", jobs, n)
	}
}

// TestHandlerPoolGoexitHandsOn: jobs queued behind ones whose goroutines
// end inside the job (runtime.Goexit) still run, each once.
func TestHandlerPoolGoexitHandsOn(t *testing.T) {
	t.Parallel()
	hp := runBurst(t, 50, runtime.Goexit)
	waitUntil(t, "the goroutines to be gone", func() bool { return hp.live.Load() == 0 })
}

// runBurst hands jobs jobs to a new pool at once, each counting its run and
// then calling end, and fails t unless each runs once. The pool closes when
// t ends.
func runBurst(t *testing.T, jobs int, end func()) *handlerPool {
	t.Helper()
	hp := newHandlerPool()
	t.Cleanup(hp.close)
	var ran sync.WaitGroup
	ran.Add(jobs)
	counts := make([]atomic.Int32, jobs)
	hp.runAll(numberedLeases(jobs), func(l *lease) {
		counts[l.token].Add(1)
		ran.Done()
		end()
	})
	ran.Wait()
	for i := range counts {
		if n := counts[i].Load(); n != 1 {
			t.Fatalf("job %d ran %d times", i, n)
		}
	}
	return hp
}

// numberedLeases returns n leases whose tokens are 0 to n-1.
func numberedLeases(n int) []*lease {
	ls := make([]*lease, n)
	for i := range ls {
		ls[i] = &lease{token: int64(i)}
	}
	return ls
}

// TestHandlerPoolGoroutinesExit: waiting goroutines exit when the pool
// closes (running ones when their job ends) or once they waited too long; a
// goroutine whose job called runtime.Goexit is gone and the next job gets a
// new one; a reopened pool starts goroutines again.
func TestHandlerPoolGoroutinesExit(t *testing.T) {
	t.Parallel()
	t.Run("close", func(t *testing.T) {
		t.Parallel()
		hp := newHandlerPool()
		done := make(chan struct{}, 2)
		release := make(chan struct{})
		// The first job ends only once the second has started, so the two
		// run on two goroutines: on a loaded machine the first goroutine
		// could otherwise be idle again before the second run and take
		// the second job itself.
		second := make(chan struct{})
		hp.run(&lease{}, func(*lease) { <-second; done <- struct{}{} })
		hp.run(&lease{}, func(*lease) { close(second); <-release; done <- struct{}{} })
		<-done
		waitUntil(t, "the first goroutine to wait", func() bool { return idleCount(hp) == 1 })
		hp.close()
		close(release)
		<-done
		waitUntil(t, "the goroutines to exit on close", func() bool { return hp.live.Load() == 0 })
		hp.open()
		ran := make(chan struct{})
		hp.run(&lease{}, func(*lease) { close(ran) })
		<-ran
		hp.close()
		waitUntil(t, "the goroutine of the reopened pool to exit", func() bool { return hp.live.Load() == 0 })
	})
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		hp := newHandlerPool()
		defer hp.close()
		hp.maxIdle = 10 * time.Millisecond
		ran := make(chan uint64, 1)
		work := func(*lease) { ran <- goid() }
		hp.run(&lease{}, work)
		first := <-ran
		waitUntil(t, "the goroutine to wait", func() bool { return idleCount(hp) == 1 })
		time.Sleep(20 * time.Millisecond)
		// The next job retires the goroutine that waited too long and
		// gets a new one.
		hp.run(&lease{}, work)
		if second := <-ran; second == first {
			t.Fatal("a goroutine that waited past the idle time took a job")
		}
		waitUntil(t, "the idle goroutine to exit", func() bool { return hp.live.Load() == 1 })
	})
	t.Run("goexit", func(t *testing.T) {
		t.Parallel()
		hp := newHandlerPool()
		defer hp.close()
		hp.run(&lease{}, func(*lease) { runtime.Goexit() })
		waitUntil(t, "the goroutine to be gone", func() bool { return hp.live.Load() == 0 })
		ran := make(chan struct{})
		hp.run(&lease{}, func(*lease) { close(ran) })
		<-ran
	})
}

// TestClientHandlersReusedAndStopped: a client's handlers run on the
// producer's pool, each with its own context (cancelled when its job ends),
// a panic in one fails that job only, and Stop leaves no pool goroutine
// behind.
func TestClientHandlersReusedAndStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestSQLite(t)
	const jobs = 200
	var (
		mu       sync.Mutex
		ctxs     []context.Context
		finished int
		gids     = map[uint64]bool{}
	)
	w := NewWorkers()
	AddWorker(w, WorkFunc[poolArgs](func(ctx context.Context, j *Job[poolArgs]) error {
		mu.Lock()
		for _, prev := range ctxs {
			if prev == ctx {
				mu.Unlock()
				return errors.New("handler context shared with an earlier job")
			}
		}
		ctxs = append(ctxs, ctx)
		gids[goid()] = true
		finished++
		mu.Unlock()
		if j.Args.Panic {
			panic("boom")
		}
		return nil
	}))
	c, err := NewClient(d, &Config{Workers: w, Queues: map[string]QueueConfig{defaultQueue: {MaxWorkers: 4}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]InsertManyParams, jobs)
	for i := range params {
		params[i].Args = poolArgs{Panic: i == 7}
	}
	params[7].InsertOpts = &InsertOpts{MaxAttempts: 1} // discarded, not retried
	if _, err := c.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "every job to end", func() bool {
		s := c.Stats()
		return s.Completed+s.Discarded == jobs
	})
	pool := c.core.producers[defaultQueue].handlers
	// A goroutine that just freed its worker slot may not wait for a job
	// yet when the next claim hands one out: at most one such per slot.
	if n := pool.live.Load(); n > 2*4 {
		t.Errorf("pool has %d goroutines for 4 workers", n)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the pool's goroutines to exit after Stop", func() bool { return pool.live.Load() == 0 })
	if len(gids) > 2*4 {
		t.Errorf("%d jobs ran on %d goroutines; want the pool's few reused", jobs, len(gids))
	}
	for _, hctx := range ctxs {
		if hctx.Err() == nil {
			t.Fatal("a handler context is still live after its job ended")
		}
	}
	if s := c.Stats(); s.Completed != jobs-1 || s.Failed != 1 || s.Discarded != 1 {
		t.Fatalf("stats = %+v, want %d completed and 1 failed and discarded (the panic)", s, jobs-1)
	}
}

type poolArgs struct {
	Panic bool `json:"panic"`
}

func (poolArgs) Kind() string { return "pool" }
