package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
)

// leaseholdEngine runs our client with heartbeats, fencing and attempt
// history on (they cannot be switched off).
type leaseholdEngine[TTx any] struct {
	label      string
	drv        driver.Driver[TTx]
	cfg        leasehold.Config // Workers and Logger are filled in at start
	h          *hooks
	exec       func(ctx context.Context, sql string) error
	resets     []string
	analyzeSQL string
	hold       bool // insert held jobs (heartbeat mode)
	keys       int  // when > 0, jobs get one of this many flow-control keys, round robin
	// remote inserts single jobs through the insert-only client, as another
	// process would: the running client is not woken locally, only by the
	// driver's notifications or its next poll.
	remote bool
	// insertVia, when set, inserts single jobs instead: through another
	// process (leasehold-xproc).
	insertVia func(ctx context.Context, a benchArgs) error

	inserter *leasehold.Client[TTx]
	client   atomic.Pointer[leasehold.Client[TTx]]

	trace     *stmtTrace // nil unless the driver is traced
	startedAt time.Time
	wall      time.Duration // total time between start and stop
}

func newLeaseholdEngine[TTx any](label string, drv driver.Driver[TTx], cfg leasehold.Config, h *hooks,
	exec func(context.Context, string) error, resets []string, analyzeSQL string,
) (*leaseholdEngine[TTx], error) {
	cfg.Logger = benchLogger()
	ins, err := leasehold.NewClient(drv, &leasehold.Config{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%s: new insert client: %w", label, err)
	}
	return &leaseholdEngine[TTx]{label: label, drv: drv, cfg: cfg, h: h, exec: exec, resets: resets, analyzeSQL: analyzeSQL, inserter: ins}, nil
}

func benchLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func (e *leaseholdEngine[TTx]) name() string { return e.label }

func (e *leaseholdEngine[TTx]) reset(ctx context.Context) error {
	for _, q := range e.resets {
		if err := e.exec(ctx, q); err != nil {
			return fmt.Errorf("%s: reset: %w", e.label, err)
		}
	}
	return nil
}

// insertClient is the running client when there is one, so that its own
// producers are woken, else the insert-only client.
func (e *leaseholdEngine[TTx]) analyze(ctx context.Context) error {
	if e.analyzeSQL == "" {
		return nil
	}
	return e.exec(ctx, e.analyzeSQL)
}

func (e *leaseholdEngine[TTx]) insertClient() *leasehold.Client[TTx] {
	if c := e.client.Load(); c != nil {
		return c
	}
	return e.inserter
}

func (e *leaseholdEngine[TTx]) insert(ctx context.Context, n int) error {
	const batch = 10_000
	c := e.insertClient()
	params := make([]leasehold.InsertManyParams, 0, batch)
	for i, a := range makeArgs(n) {
		a.Hold = e.hold
		p := leasehold.InsertManyParams{Args: a}
		if e.keys > 0 {
			p.InsertOpts = &leasehold.InsertOpts{Key: "k" + strconv.Itoa(i%e.keys)}
		}
		params = append(params, p)
		if len(params) == batch || i == n-1 {
			if _, err := c.InsertManyFast(ctx, params); err != nil {
				return fmt.Errorf("%s: insert: %w", e.label, err)
			}
			params = params[:0]
		}
	}
	return nil
}

func (e *leaseholdEngine[TTx]) insertOne(ctx context.Context, a benchArgs) error {
	if e.insertVia != nil {
		return e.insertVia(ctx, a)
	}
	c := e.insertClient()
	if e.remote {
		c = e.inserter
	}
	_, err := c.Insert(ctx, a, nil)
	return err
}

func (e *leaseholdEngine[TTx]) start(ctx context.Context) error {
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[benchArgs](func(ctx context.Context, j *leasehold.Job[benchArgs]) error {
		e.h.handle(ctx, j.Args)
		return nil
	}))
	cfg := e.cfg
	cfg.Workers = workers
	c, err := leasehold.NewClient(e.drv, &cfg)
	if err != nil {
		return fmt.Errorf("%s: new client: %w", e.label, err)
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("%s: start: %w", e.label, err)
	}
	e.client.Store(c)
	e.startedAt = time.Now()
	return nil
}

func (e *leaseholdEngine[TTx]) stop(ctx context.Context) error {
	c := e.client.Swap(nil)
	if c == nil {
		return nil
	}
	e.wall += time.Since(e.startedAt)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return c.Stop(ctx)
}

// traceReport prints the statement trace, when the driver is traced.
func (e *leaseholdEngine[TTx]) traceReport(w io.Writer) {
	if e.trace != nil {
		e.trace.print(w, e.label, e.wall)
	}
}

func (e *leaseholdEngine[TTx]) completed() int64 {
	if c := e.client.Load(); c != nil {
		return c.Stats().Completed
	}
	return 0
}

// stats returns the running client's counters.
func (e *leaseholdEngine[TTx]) stats() leasehold.Stats {
	if c := e.client.Load(); c != nil {
		return c.Stats()
	}
	return leasehold.Stats{}
}
