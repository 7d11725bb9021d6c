package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
)

// riverEngine runs a River client.
type riverEngine[TTx any] struct {
	label      string
	drv        riverdriver.Driver[TTx]
	cfg        river.Config // Workers and Logger are filled in at start
	h          *hooks
	exec       func(ctx context.Context, sql string) error
	resets     []string
	analyzeSQL string

	inserter *river.Client[TTx]
	client   atomic.Pointer[river.Client[TTx]]
	done     atomic.Int64
	unsub    func()
	wg       sync.WaitGroup
}

func newRiverEngine[TTx any](label string, drv riverdriver.Driver[TTx], cfg river.Config, h *hooks,
	exec func(context.Context, string) error, resets []string, analyzeSQL string,
) (*riverEngine[TTx], error) {
	cfg.Logger = benchLogger()
	ins, err := river.NewClient(drv, &river.Config{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("%s: new insert client: %w", label, err)
	}
	return &riverEngine[TTx]{label: label, drv: drv, cfg: cfg, h: h, exec: exec, resets: resets, analyzeSQL: analyzeSQL, inserter: ins}, nil
}

func (e *riverEngine[TTx]) name() string { return e.label }

func (e *riverEngine[TTx]) reset(ctx context.Context) error {
	for _, q := range e.resets {
		if err := e.exec(ctx, q); err != nil {
			return fmt.Errorf("%s: reset: %w", e.label, err)
		}
	}
	return nil
}

func (e *riverEngine[TTx]) analyze(ctx context.Context) error {
	if e.analyzeSQL == "" {
		return nil
	}
	return e.exec(ctx, e.analyzeSQL)
}

func (e *riverEngine[TTx]) insertClient() *river.Client[TTx] {
	if c := e.client.Load(); c != nil {
		return c
	}
	return e.inserter
}

func (e *riverEngine[TTx]) insert(ctx context.Context, n int) error {
	const batch = 10_000
	c := e.insertClient()
	params := make([]river.InsertManyParams, 0, batch)
	for i, a := range makeArgs(n) {
		params = append(params, river.InsertManyParams{Args: a})
		if len(params) == batch || i == n-1 {
			if _, err := c.InsertManyFast(ctx, params); err != nil {
				return fmt.Errorf("%s: insert: %w", e.label, err)
			}
			params = params[:0]
		}
	}
	return nil
}

func (e *riverEngine[TTx]) insertOne(ctx context.Context, a benchArgs) error {
	_, err := e.insertClient().Insert(ctx, a, nil)
	return err
}

// riverWorker is River's no-op benchmark worker plus the hooks.
type riverWorker struct {
	river.WorkerDefaults[benchArgs]
	h *hooks
}

func (w *riverWorker) Work(ctx context.Context, j *river.Job[benchArgs]) error {
	w.h.handle(ctx, j.Args)
	return nil
}

func (e *riverEngine[TTx]) start(ctx context.Context) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{h: e.h})
	cfg := e.cfg
	cfg.Workers = workers
	c, err := river.NewClient(e.drv, &cfg)
	if err != nil {
		return fmt.Errorf("%s: new client: %w", e.label, err)
	}
	// Like River's own bench, count completions from the subscription: an
	// event is sent once the completer has written the job's state.
	events, unsub := c.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: 250_000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	e.done.Store(0)
	e.unsub = unsub
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for ev := range events {
			if ev != nil {
				e.done.Add(1)
			}
		}
	}()
	if err := c.Start(ctx); err != nil {
		unsub()
		e.wg.Wait()
		return fmt.Errorf("%s: start: %w", e.label, err)
	}
	e.client.Store(c)
	return nil
}

func (e *riverEngine[TTx]) stop(ctx context.Context) error {
	c := e.client.Swap(nil)
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := c.Stop(ctx)
	e.unsub()
	e.wg.Wait()
	return err
}

func (e *riverEngine[TTx]) completed() int64 { return e.done.Load() }
