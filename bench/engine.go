package main

import (
	"context"
	"sync"
	"time"
)

// benchArgs are the arguments of every benchmark job, for every engine.
type benchArgs struct {
	Num int `json:"num"`
	// At is the enqueue time in Unix nanoseconds (latency mode only).
	At int64 `json:"at,omitempty"`
	// Hold makes the handler wait until the round ends (heartbeat mode).
	Hold bool `json:"hold,omitempty"`
}

// Kind is the job kind for leasehold and River alike.
func (benchArgs) Kind() string { return "bench" }

// engine is one queue under test. Each round resets it, inserts a backlog
// (untimed), starts it, watches completed, and stops it.
type engine interface {
	name() string
	// reset empties the engine's tables.
	reset(ctx context.Context) error
	// analyze refreshes the planner statistics after a backlog is inserted
	// (autovacuum may be off, as it is on the reference machine).
	analyze(ctx context.Context) error
	// insert inserts n jobs in bulk.
	insert(ctx context.Context, n int) error
	// insertOne inserts one job on its own, as an application would.
	insertOne(ctx context.Context, a benchArgs) error
	start(ctx context.Context) error
	stop(ctx context.Context) error
	// completed counts the completions written to the database since start.
	completed() int64
}

// hooks is what handlers do besides returning: record the enqueue-to-start
// latency, or hold until released.
type hooks struct {
	mu      sync.Mutex
	samples []time.Duration
	starts  []jobStart
	hold    chan struct{}
}

// jobStart is when the handler of the job with argument Num started.
type jobStart struct {
	num int
	at  time.Time
}

func newHooks() *hooks { return &hooks{hold: make(chan struct{})} }

// handle runs at the start of every handler.
func (h *hooks) handle(ctx context.Context, a benchArgs) {
	if a.At != 0 {
		now := time.Now()
		d := now.Sub(time.Unix(0, a.At))
		h.mu.Lock()
		h.samples = append(h.samples, d)
		h.starts = append(h.starts, jobStart{num: a.Num, at: now})
		h.mu.Unlock()
	}
	if a.Hold {
		select {
		case <-h.hold:
		case <-ctx.Done():
		}
	}
}

// takeSamples returns and clears the recorded latencies and the handlers'
// start times.
func (h *hooks) takeSamples() ([]time.Duration, []jobStart) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, st := h.samples, h.starts
	h.samples, h.starts = nil, nil
	return s, st
}

func (h *hooks) sampleCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.samples)
}

// release ends every held handler and re-arms the hold for the next round.
func (h *hooks) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.hold)
	h.hold = make(chan struct{})
}

// makeArgs returns n plain jobs' arguments.
func makeArgs(n int) []benchArgs {
	out := make([]benchArgs, n)
	for i := range out {
		out[i].Num = i
	}
	return out
}
