package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"
)

// runDrain times the working of a backlog inserted beforehand, from Start to
// the last completion written, in alternating rounds.
func runDrain(ctx context.Context, o *options, out io.Writer) error {
	b, err := openBackend(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()
	names := o.engines
	if names == nil {
		names = b.drainEngines
		if o.keys > 0 {
			// The keyed drain against the same drain without keys.
			names = []string{"leasehold", "leasehold-keys"}
		}
	}
	var engines []engine
	for _, n := range names {
		e, err := b.engine(n, engineSpec{workers: o.workers, keys: o.keys, keyLimit: o.keyLimit}, newHooks())
		if err != nil {
			return err
		}
		engines = append(engines, e)
	}
	jobs := orDefault(o.jobs, b.drainJobs)
	all, err := alternate(ctx, engines, orDefault(o.rounds, 3), func(e engine) (sample, error) { return drainRound(ctx, e, jobs, b) })
	if err != nil {
		return err
	}
	b.printAbout(out)
	fmt.Fprintf(out, "# drain: %d jobs per round, %d rounds, engines alternating\n", jobs, orDefault(o.rounds, 3))
	if o.keys > 0 {
		fmt.Fprintf(out, "# leasehold-keys: jobs over %d keys round robin, KeyLimit %d\n", o.keys, max(1, o.keyLimit))
	}
	printThroughput(out, b.line+"drain", "jobs/s", all, b.server)
	printTraces(out, engines)
	b.printAfter(out)
	return nil
}

// alternate runs rounds of every engine, rotating their order each round so
// that no engine always runs first or right after a given peer.
func alternate(ctx context.Context, engines []engine, rounds int, round func(engine) (sample, error)) ([]*series, error) {
	all := make([]*series, len(engines))
	for i, e := range engines {
		all[i] = &series{engine: e.name()}
	}
	for r := range rounds {
		for i := range engines {
			k := (i + r) % len(engines)
			s, err := round(engines[k])
			if err != nil {
				return nil, fmt.Errorf("%s round %d: %w", engines[k].name(), r+1, err)
			}
			fmt.Fprintf(os.Stderr, "  round %d %-18s %10.1f\n", r+1, engines[k].name(), s.value)
			all[k].samples = append(all[k].samples, s)
		}
	}
	return all, nil
}

// drainRound drains n jobs on b; b.server names the database processes
// whose CPU it counts.
func drainRound(ctx context.Context, e engine, n int, b *backend) (sample, error) {
	server := b.server
	if err := prepareBacklog(ctx, e, n); err != nil {
		return sample{}, err
	}
	if b.settle != nil {
		if err := b.settle(ctx); err != nil {
			return sample{}, err
		}
	}
	resetPeakRSS()
	u0 := takeUsage(server)
	var (
		elapsed time.Duration
		err     error
	)
	withLabel(ctx, e.name(), func(ctx context.Context) {
		start := time.Now()
		if err = e.start(ctx); err != nil {
			return
		}
		// Generous, a guard against hangs only: River's SQLite driver
		// completes about 2,000 jobs/s, leasehold on a loaded MariaDB a few
		// hundred.
		err = waitFor(ctx, 30*time.Second+time.Duration(n)*10*time.Millisecond, func() bool { return e.completed() >= int64(n) })
		elapsed = time.Since(start)
	})
	u1 := takeUsage(server)
	rss := peakRSS()
	if stopErr := e.stop(ctx); err == nil {
		err = stopErr
	}
	if err != nil {
		return sample{}, err
	}
	return makeSample(float64(n)/elapsed.Seconds(), u0, u1, n, rss), nil
}

// prepareBacklog empties the engine's tables and inserts n jobs, untimed.
func prepareBacklog(ctx context.Context, e engine, n int) error {
	if err := e.reset(ctx); err != nil {
		return err
	}
	if n > 0 {
		if err := e.insert(ctx, n); err != nil {
			return err
		}
	}
	return e.analyze(ctx)
}

func makeSample(value float64, u0, u1 resUsage, jobs int, rss int64) sample {
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(jobs, 1)) }
	return sample{value: value, goCPUPerJob: per(u1.goCPU - u0.goCPU), pgCPUPerJob: per(u1.pgCPUSince(u0)),
		pgFaultsPerJob: float64(u1.pgFaultsSince(u0)) / float64(max(jobs, 1)), peakRSSBytes: rss}
}
