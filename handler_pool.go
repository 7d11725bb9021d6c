package leasehold

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// handlerPool runs a producer's jobs on goroutines that outlive one job.
//
// Jobs handed to the pool join its queue. A goroutine that finishes a job
// takes the next one queued without waiting, so a busy queue of short jobs
// runs on a few goroutines that never park between jobs. No job waits
// behind a slow one, though: whenever a goroutine takes a job and more are
// queued, it hands the next one to another goroutine (a waiting one, the
// most recently idle first, or a new one), unless GOMAXPROCS goroutines so
// handed a job have not started it yet; a new claim's jobs are handed out
// the same way. A goroutine handed a job does the same when it starts, so
// a claim of jobs that all block (on the network, say) spreads over as
// many goroutines as it has jobs, a few starts at a time, while a claim of
// jobs that end in microseconds wakes only as many goroutines as start
// while the first ones work through the queue. Each job still gets its own
// context, panic recovery and outcome write (runJob); only the goroutine
// is reused.
//
// At most GOMAXPROCS, not one: with one, a small claim's jobs started one
// after another on one processor, and the time from a job's insert to its
// start at 1,000 jobs a second rose by about 0.4 ms at the median.
//
// Goroutines that waited longer than handlerIdle are retired, oldest first,
// when the next jobs arrive, and all of them when the producer closes the
// pool (the client stops); a goroutine waiting in between holds only its
// stack. Jobs handed over before close still run.
type handlerPool struct {
	mu     sync.Mutex
	idle   []*handlerWorker // waiting goroutines, the most recently idle last
	queued handedQueue      // jobs no goroutine has taken yet
	// starting counts the goroutines handed a job that have not started
	// it yet: while maxStarting have not, a goroutine taking a job hands
	// none on.
	starting    int
	maxStarting int // GOMAXPROCS when the pool was made
	closed      bool
	live        atomic.Int64 // goroutines of the pool, running or waiting
	maxIdle     time.Duration
	// epoch is when the pool was made: the goroutines' idle times count
	// from it on the monotonic clock alone (time.Since), which costs less
	// per job than time.Now.
	epoch time.Time
}

// handed is a job handed to the pool, with what runs it.
type handed struct {
	l    *lease
	work func(*lease)
}

// handedQueue is the pool's queue of jobs, oldest first.
type handedQueue struct {
	items []handed
	head  int
}

func (q *handedQueue) len() int { return len(q.items) - q.head }

func (q *handedQueue) push(ls []*lease, work func(*lease)) {
	if q.head > 0 && q.head >= len(q.items)/2 {
		// Move the queued jobs down rather than grow past taken slots.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	for _, l := range ls {
		q.items = append(q.items, handed{l: l, work: work})
	}
}

func (q *handedQueue) pop() handed {
	h := q.items[q.head]
	q.items[q.head] = handed{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return h
}

// handlerWorker is one goroutine of the pool.
type handlerWorker struct {
	jobs  chan handed   // capacity 1: handing a job over never blocks; a nil lease retires it
	since time.Duration // when it started waiting, since the pool's epoch
}

// handlerIdle is how long a handler goroutine may wait for a job before
// the pool retires it.
const handlerIdle = 5 * time.Second

func newHandlerPool() *handlerPool {
	return &handlerPool{maxIdle: handlerIdle, epoch: time.Now(), maxStarting: max(1, runtime.GOMAXPROCS(0))}
}

// open lets the pool start goroutines again after close (a restarted client).
func (hp *handlerPool) open() {
	hp.mu.Lock()
	hp.closed = false
	hp.mu.Unlock()
}

// close retires the waiting goroutines; the running ones exit when no job
// is left queued.
func (hp *handlerPool) close() {
	hp.mu.Lock()
	idle := hp.idle
	hp.idle, hp.closed = nil, true
	hp.mu.Unlock()
	for _, w := range idle {
		w.jobs <- handed{}
	}
}

// run has work(l) called on a goroutine of the pool.
func (hp *handlerPool) run(l *lease, work func(*lease)) {
	hp.runAll([]*lease{l}, work)
}

// runAll has work called on each of ls, in order, on the pool's goroutines:
// it queues them and hands the first ones to goroutines, as many as may be
// starting at once, and those hand on the next (see handlerPool). It costs
// the pool's lock and clock once per call.
func (hp *handlerPool) runAll(ls []*lease, work func(*lease)) {
	if len(ls) == 0 {
		return
	}
	now := time.Since(hp.epoch)
	hp.mu.Lock()
	// Retire the goroutines that waited too long (the oldest are first).
	var retire []*handlerWorker
	for len(hp.idle) > 0 && now-hp.idle[0].since > hp.maxIdle {
		retire = append(retire, hp.idle[0])
		hp.idle[0] = nil
		hp.idle = hp.idle[1:]
	}
	hp.queued.push(ls, work)
	var (
		ws [8]*handlerWorker // more than 8 processors: the rest start by hand-on
		hs [8]handed
	)
	n := 0
	for ; n < len(ws); n++ {
		ws[n], hs[n] = hp.handOnLocked()
		if hs[n].l == nil {
			break
		}
	}
	hp.mu.Unlock()
	for _, r := range retire {
		r.jobs <- handed{}
	}
	for i := range n {
		hp.start(ws[i], hs[i])
	}
}

// handOnLocked takes the next queued job for another goroutine when one is
// queued and fewer than maxStarting goroutines handed a job have yet to
// start it. It returns the goroutine (a waiting one, or nil for a new one)
// and the job, for start to send; with none to hand on, the job's lease is
// nil. hp.mu is held.
func (hp *handlerPool) handOnLocked() (*handlerWorker, handed) {
	if hp.starting >= hp.maxStarting || hp.queued.len() == 0 {
		return nil, handed{}
	}
	hp.starting++
	h := hp.queued.pop()
	if n := len(hp.idle); n > 0 {
		w := hp.idle[n-1]
		hp.idle[n-1] = nil
		hp.idle = hp.idle[:n-1]
		return w, h
	}
	return nil, h
}

// start sends h to w, or to a new goroutine when w is nil; it does nothing
// when h holds no job.
func (hp *handlerPool) start(w *handlerWorker, h handed) {
	switch {
	case h.l == nil:
	case w != nil:
		w.jobs <- h
	default:
		hp.live.Add(1)
		go hp.serve(&handlerWorker{jobs: make(chan handed, 1)}, h)
	}
}

// serve runs h, then the jobs queued and those handed to it, until it is
// retired.
func (hp *handlerPool) serve(w *handlerWorker, h handed) {
	defer hp.exit()
	for h.l != nil {
		hp.mu.Lock()
		hp.starting--
		nw, next := hp.handOnLocked()
		hp.mu.Unlock()
		hp.start(nw, next)
		for {
			h.work(h.l)
			hp.mu.Lock()
			if hp.queued.len() > 0 {
				h = hp.queued.pop()
				nw, next := hp.handOnLocked()
				hp.mu.Unlock()
				hp.start(nw, next)
				continue
			}
			if hp.closed {
				hp.mu.Unlock()
				return
			}
			w.since = time.Since(hp.epoch)
			hp.idle = append(hp.idle, w)
			hp.mu.Unlock()
			break
		}
		h = w.next()
	}
}

// exit ends a goroutine of the pool. One that ends inside a job
// (runtime.Goexit in a handler) may leave jobs queued that it would have
// run or handed on: they are handed on here.
func (hp *handlerPool) exit() {
	hp.live.Add(-1)
	hp.mu.Lock()
	w, h := hp.handOnLocked()
	hp.mu.Unlock()
	hp.start(w, h)
}

// next waits for the goroutine's next job (a nil lease retires it) with
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
func (w *handlerWorker) next() handed {
	var reserve [stackReserve]byte
	h := <-w.jobs
	keepStack(&reserve)
	return h
}

// stackReserve is the stack a waiting handler goroutine keeps in use.
const stackReserve = 2 << 10

// keepStack keeps reserve, and so its stack frame, alive.
//
//go:noinline
func keepStack(reserve *[stackReserve]byte) { _ = reserve }
