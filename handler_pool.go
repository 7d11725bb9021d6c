package leasehold

import (
	"sync"
	"sync/atomic"
	"time"
)

// handlerPool runs a producer's jobs on goroutines that outlive one job.
// A goroutine that finished a job waits for the next one, so a busy queue
// reuses goroutines instead of starting one per job. Each job still gets its
// own context, panic recovery and outcome write (runJob); only the goroutine
// is reused. Waiting goroutines are handed jobs most recently idle first
// (their stacks are the likeliest to still be grown). Those that waited
// longer than handlerIdle are retired, oldest first, when the next job
// arrives, and all of them when the producer closes the pool (the client
// stops); a goroutine waiting in between holds only its stack.
type handlerPool struct {
	mu      sync.Mutex
	idle    []*handlerWorker // waiting goroutines, the most recently idle last
	closed  bool
	live    atomic.Int64 // goroutines of the pool, running or waiting
	maxIdle time.Duration
	// epoch is when the pool was made: the goroutines' idle times count
	// from it on the monotonic clock alone (time.Since), which costs less
	// per job than time.Now.
	epoch time.Time
}

// handlerWorker is one goroutine of the pool.
type handlerWorker struct {
	jobs  chan *lease   // capacity 1: handing a job over never blocks; nil retires it
	since time.Duration // when it started waiting, since the pool's epoch
}

// handlerIdle is how long a handler goroutine may wait for a job before
// the pool retires it.
const handlerIdle = 5 * time.Second

func newHandlerPool() *handlerPool { return &handlerPool{maxIdle: handlerIdle, epoch: time.Now()} }

// open lets the pool start goroutines again after close (a restarted client).
func (hp *handlerPool) open() {
	hp.mu.Lock()
	hp.closed = false
	hp.mu.Unlock()
}

// close retires the waiting goroutines; the running ones exit when their job
// ends.
func (hp *handlerPool) close() {
	hp.mu.Lock()
	idle := hp.idle
	hp.idle, hp.closed = nil, true
	hp.mu.Unlock()
	for _, w := range idle {
		w.jobs <- nil
	}
}

// run has work(l) called on a waiting goroutine, or on a new one when none
// waits: a job never queues behind another.
func (hp *handlerPool) run(l *lease, work func(*lease)) {
	hp.runAll([]*lease{l}, work)
}

// runAll is run for each of ls, handing them to the waiting goroutines
// (most recently idle first) a chunk at a time, so that a claim costs the
// pool's lock and clock once per chunk, not once per job.
func (hp *handlerPool) runAll(ls []*lease, work func(*lease)) {
	var taken [handOffChunk]*handlerWorker
	for len(ls) > 0 {
		chunk := ls[:min(len(ls), handOffChunk)]
		ls = ls[len(chunk):]
		now := time.Since(hp.epoch)
		hp.mu.Lock()
		// Retire the goroutines that waited too long (the oldest are first).
		var retire []*handlerWorker
		for len(hp.idle) > 0 && now-hp.idle[0].since > hp.maxIdle {
			retire = append(retire, hp.idle[0])
			hp.idle = hp.idle[1:]
		}
		n := 0
		for ; n < len(chunk) && len(hp.idle) > 0; n++ {
			last := len(hp.idle) - 1
			taken[n], hp.idle[last] = hp.idle[last], nil
			hp.idle = hp.idle[:last]
		}
		hp.mu.Unlock()
		for _, r := range retire {
			r.jobs <- nil
		}
		for i, l := range chunk {
			if i < n {
				taken[i].jobs <- l
				taken[i] = nil
				continue
			}
			hp.live.Add(1)
			go hp.serve(&handlerWorker{jobs: make(chan *lease, 1)}, l, work)
		}
	}
}

// handOffChunk is how many jobs runAll hands over per look at the waiting
// goroutines.
const handOffChunk = 64

// serve runs l, then the jobs handed to it, until it is retired.
func (hp *handlerPool) serve(w *handlerWorker, l *lease, work func(*lease)) {
	defer hp.live.Add(-1)
	for l != nil {
		work(l)
		hp.mu.Lock()
		if hp.closed {
			hp.mu.Unlock()
			return
		}
		w.since = time.Since(hp.epoch)
		hp.idle = append(hp.idle, w)
		hp.mu.Unlock()
		l = w.next()
	}
}

// next waits for the goroutine's next job (nil retires it) with
// stackReserve bytes of its stack in use.
//
// The garbage collector halves the stack of a goroutine that uses less than
// a quarter of it when the collector scans it. A goroutine waiting on a
// channel near the bottom of its stack uses almost none, so every
// collection would shrink the stacks of the waiting handler goroutines to
// the minimum, and each next job would copy its stack again as it grew back
// (twice to reach 8 KiB): on a busy queue of small jobs that copying took a
// quarter of the client's CPU. Waiting below a reserved frame keeps a stack
// of up to 4×stackReserve as it is; larger stacks still shrink.
//
//go:noinline
func (w *handlerWorker) next() *lease {
	var reserve [stackReserve]byte
	l := <-w.jobs
	keepStack(&reserve)
	return l
}

// stackReserve is the stack a waiting handler goroutine keeps in use.
const stackReserve = 2 << 10

// keepStack keeps reserve, and so its stack frame, alive.
//
//go:noinline
func keepStack(reserve *[stackReserve]byte) { _ = reserve }
