package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Continuous mode keeps between lowWater and lowWater+insertBatch jobs
// waiting, inserting in batches while the engine works.
const (
	lowWater    = 20_000
	insertBatch = 5_000
)

// runContinuous measures completions per second while inserting at the
// same time, after a warm-up, in alternating rounds.
func runContinuous(ctx context.Context, o *options, out io.Writer) error {
	env, err := setupPostgres(ctx, o.schemaPrefix)
	if err != nil {
		return err
	}
	defer env.close()
	names := o.engines
	if names == nil {
		names = []string{"raw", "river", "leasehold"}
	}
	var engines []engine
	for _, n := range names {
		e, err := pgEngine(ctx, env, n, engineSpec{workers: o.workers}, newHooks())
		if err != nil {
			return err
		}
		engines = append(engines, e)
	}
	dur := orDefault(o.duration, 10*time.Second)
	rounds := orDefault(o.rounds, 3)
	all, err := alternate(ctx, engines, rounds, func(e engine) (sample, error) { return continuousRound(ctx, e, dur) })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# continuous: %s measured per round after a warm-up, backlog kept at %d-%d jobs, %d rounds\n", dur, lowWater, lowWater+insertBatch, rounds)
	printThroughput(out, "continuous", "jobs/s", all, pgServer)
	printTraces(out, engines)
	return nil
}

func continuousRound(ctx context.Context, e engine, dur time.Duration) (sample, error) {
	if err := prepareBacklog(ctx, e, lowWater); err != nil {
		return sample{}, err
	}
	resetPeakRSS()
	var (
		s   sample
		err error
	)
	withLabel(ctx, e.name(), func(ctx context.Context) {
		if err = e.start(ctx); err != nil {
			return
		}
		insCtx, stopInserting := context.WithCancel(ctx)
		var (
			wg     sync.WaitGroup
			insErr error
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			inserted := int64(lowWater)
			for insCtx.Err() == nil {
				if inserted-e.completed() >= lowWater {
					sleepCtx(insCtx, 2*time.Millisecond)
					continue
				}
				if err := e.insert(insCtx, insertBatch); err != nil {
					if insCtx.Err() == nil {
						insErr = err
					}
					return
				}
				inserted += insertBatch
			}
		}()
		sleepCtx(ctx, min(time.Second, dur/4))
		c0, u0 := e.completed(), takeUsage(pgServer)
		sleepCtx(ctx, dur)
		c1, u1 := e.completed(), takeUsage(pgServer)
		stopInserting()
		wg.Wait()
		n := int(c1 - c0)
		s = makeSample(float64(n)/u1.at.Sub(u0.at).Seconds(), u0, u1, n, peakRSS())
		err = insErr
	})
	if stopErr := e.stop(ctx); err == nil {
		err = stopErr
	}
	return s, err
}
