package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/postgres"
)

// latencyResult is one engine's percentiles, one value per round.
type latencyResult struct {
	engine        string
	p50, p90, p99 []float64 // milliseconds
	// The insert call's p50 and p99, and the p50 and p99 of the time from
	// the insert call's return (its commit) to the handler's start: where
	// the enqueue-to-start time goes, the insert's commit or the wake-up
	// and claim.
	insertP50, insertP99 []float64
	afterP50, afterP99   []float64
	late, jobs           int   // jobs not started within the wait after the last insert, of all
	notices              int64 // insert notifications the engine sent (Postgres), of all rounds
	counted              bool  // notices were counted
}

// latencyWait is how long a round waits after its last insert for the jobs
// still to start. An engine that cannot keep up with the rate (River's
// defaults at 1,000/s: 100 workers, a 100 ms fetch cooldown) leaves jobs
// unstarted; they count at the time waited, so that its percentiles are
// lower bounds, and its line says how many were late.
const latencyWait = 10 * time.Second

// runLatency enqueues single jobs at fixed rates and measures the time
// from the start of the insert call to the start of the handler. Each
// engine runs its default configuration; River also with a 2 ms fetch
// cooldown. The raw loop is not measured: it has no wake-up, so its latency
// is its poll interval. On MySQL and SQLite (no River here) leasehold runs
// three times: woken by its own inserts, by another client's in the same
// process, and by a child process's (leasehold-xproc), which reach it
// through the driver's wake-up rows. The statement traces of the traced
// engines follow.
func runLatency(ctx context.Context, o *options, out io.Writer) error {
	b, err := openBackend(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()
	if o.retained > 0 && b.pg == nil {
		return fmt.Errorf("-retained: Postgres only")
	}
	names := o.engines
	if names == nil {
		names = b.latencyEngines
	}
	hooksOf := map[string]*hooks{}
	var engines []engine
	for _, n := range names {
		h := newHooks()
		e, err := b.engine(n, engineSpec{workers: o.workers, notifyWindow: o.notifyWindow}, h)
		if err != nil {
			return err
		}
		hooksOf[n] = h
		engines = append(engines, e)
	}
	dur := orDefault(o.duration, 10*time.Second)
	rounds := orDefault(o.rounds, 3)
	var notices *noticeCounter
	if b.pg != nil {
		if notices, err = listenNotices(ctx, postgresURL(), o.schemaPrefix); err != nil {
			return err
		}
		defer notices.close()
	}
	b.printAbout(out)
	for _, rate := range o.rates {
		results := make([]*latencyResult, len(engines))
		for i, e := range engines {
			results[i] = &latencyResult{engine: e.name()}
		}
		for r := range rounds {
			for i := range engines {
				k := (i + r) % len(engines)
				p, late, sent, err := latencyRound(ctx, engines[k], hooksOf[engines[k].name()], rate, dur, notices)
				if err != nil {
					return fmt.Errorf("%s at %d/s round %d: %w", engines[k].name(), rate, r+1, err)
				}
				results[k].add(p, late, max(1, int(float64(rate)*dur.Seconds())))
				results[k].notices += sent
				results[k].counted = notices != nil
			}
		}
		fmt.Fprintf(out, "# latency: enqueue (start of the insert call) to handler start, %d jobs/s for %s, %d rounds\n", rate, dur, rounds)
		printLatency(out, fmt.Sprintf("%slatency@%d/s", b.line, rate), results)
	}
	printTraces(out, engines)
	if o.retained > 0 {
		return runRetained(ctx, o, b.pg, out, dur, rounds)
	}
	return nil
}

func (r *latencyResult) add(p roundLatency, late, jobs int) {
	r.p50, r.p90, r.p99 = append(r.p50, p.start[0]), append(r.p90, p.start[1]), append(r.p99, p.start[2])
	r.insertP50, r.insertP99 = append(r.insertP50, p.insert[0]), append(r.insertP99, p.insert[2])
	r.afterP50, r.afterP99 = append(r.afterP50, p.afterInsert[0]), append(r.afterP99, p.afterInsert[2])
	r.late += late
	r.jobs += jobs
}

// roundLatency is one round's p50, p90 and p99 in milliseconds: of
// enqueue to handler start (late jobs counted at the time waited), of the
// insert call, and of the insert call's return to handler start (jobs that
// started only; 0 for a handler that started before the call returned).
type roundLatency struct {
	start, insert, afterInsert [3]float64
}

// latencyRound returns the round's percentiles, how many jobs had not
// started latencyWait after the last insert, and how many insert
// notifications notices counted from the first insert until the last job
// started (0 when notices is nil).
func latencyRound(ctx context.Context, e engine, h *hooks, rate int, dur time.Duration, notices *noticeCounter) (roundLatency, int, int64, error) {
	if err := prepareBacklog(ctx, e, 0); err != nil {
		return roundLatency{}, 0, 0, err
	}
	var (
		samples, inserts []time.Duration
		starts           []jobStart
		inserted         []time.Time // when each job's insert call returned, by Num
		late             int
		sent             int64
		err              error
	)
	withLabel(ctx, e.name(), func(ctx context.Context) {
		if err = e.start(ctx); err != nil {
			return
		}
		sleepCtx(ctx, 300*time.Millisecond) // listeners connected, first polls done
		h.takeSamples()
		notices.take(ctx)
		n := max(1, int(float64(rate)*dur.Seconds()))
		inserted = make([]time.Time, n)
		interval := time.Second / time.Duration(rate)
		var (
			wg    sync.WaitGroup
			errMu sync.Mutex
		)
		start := time.Now()
		for i := range n {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := time.Now()
				ierr := e.insertOne(ctx, benchArgs{Num: i, At: at.UnixNano()})
				took := time.Since(at)
				inserted[i] = at.Add(took)
				errMu.Lock()
				defer errMu.Unlock()
				inserts = append(inserts, took)
				if ierr != nil {
					err = ierr
				}
			}()
		}
		wg.Wait()
		if err != nil {
			return
		}
		waitStart := time.Now()
		if waitFor(ctx, latencyWait, func() bool { return h.sampleCount() >= n }) != nil {
			if err = ctx.Err(); err != nil {
				return
			}
		}
		samples, starts = h.takeSamples()
		sent = notices.take(ctx)
		if late = max(0, n-len(samples)); late > 0 {
			// Each late job waited at least since its insert, which was
			// at or before the wait began.
			for range late {
				samples = append(samples, time.Since(waitStart))
			}
		}
	})
	if stopErr := e.stop(ctx); err == nil {
		err = stopErr
	}
	if err != nil {
		return roundLatency{}, 0, 0, err
	}
	after := make([]time.Duration, 0, len(starts))
	for _, s := range starts {
		if s.num >= 0 && s.num < len(inserted) && !inserted[s.num].IsZero() {
			after = append(after, max(0, s.at.Sub(inserted[s.num])))
		}
	}
	return roundLatency{start: percentiles(samples), insert: percentiles(inserts), afterInsert: percentiles(after)}, late, sent, nil
}

// percentiles returns p50, p90 and p99 in milliseconds (nearest rank).
func percentiles(d []time.Duration) [3]float64 {
	if len(d) == 0 {
		return [3]float64{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(p*float64(len(s))+0.5) - 1
		i = min(max(i, 0), len(s)-1)
		return float64(s[i].Microseconds()) / 1000
	}
	return [3]float64{at(0.50), at(0.90), at(0.99)}
}

// printLatency prints one line per engine: min/median/max over rounds of
// each percentile, and the ratio of its median p50 and p99 to each peer's.
func printLatency(w io.Writer, mode string, all []*latencyResult) {
	for _, r := range all {
		var b strings.Builder
		fmt.Fprintf(&b, "%-14s %-18s ms", mode, r.engine)
		for _, m := range []struct {
			name string
			v    []float64
		}{{"p50", r.p50}, {"p90", r.p90}, {"p99", r.p99}} {
			lo, med, hi := spread(m.v)
			fmt.Fprintf(&b, "  %s median %.2f (min %.2f max %.2f)", m.name, med, lo, hi)
		}
		if len(r.insertP50) > 0 {
			fmt.Fprintf(&b, "  [insert call p50 %.2f p99 %.2f]  [insert's return to start p50 %.2f p99 %.2f]",
				median(r.insertP50), median(r.insertP99), median(r.afterP50), median(r.afterP99))
		}
		if r.counted {
			fmt.Fprintf(&b, "  [notifications/job %.3f]", float64(r.notices)/float64(r.jobs))
		}
		if r.late > 0 {
			fmt.Fprintf(&b, "  [did not keep up: %d of %d jobs not started %s after the last insert; percentiles are lower bounds]", r.late, r.jobs, latencyWait)
		}
		for _, p := range all {
			if p != r {
				fmt.Fprintf(&b, "  vs %s p50 %.2fx p99 %.2fx", p.engine, median(r.p50)/median(p.p50), median(r.p99)/median(p.p99))
			}
		}
		fmt.Fprintln(w, b.String())
	}
}

// runRetained measures claim latency and enqueue-to-start latency of
// leasehold (defaults) with o.retained finished jobs kept in its table,
// against the same with none.
func runRetained(ctx context.Context, o *options, env *pgEnv, out io.Writer, dur time.Duration, rounds int) error {
	exec := postgres.New(env.leasehold).GetExecutor()
	ins, err := pgEngine(ctx, env, "leasehold-default", engineSpec{}, newHooks())
	if err != nil {
		return err
	}
	claims := orDefault(o.jobs, 1000)
	if err := prepareBacklog(ctx, ins, 0); err != nil {
		return err
	}
	empty, err := claimLatency(ctx, ins, exec, claims)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# retained: inserting %d finished jobs into %s_leasehold.leasehold_job (untimed)\n", o.retained, o.schemaPrefix)
	if err := env.exec(ctx,
		"TRUNCATE leasehold_job, leasehold_attempt_log",
		fmt.Sprintf(`INSERT INTO leasehold_job (kind, queue, state, args, max_attempts, attempt, lease_token,
			lease_owner, leased_at, lease_until, finalized_at)
		SELECT 'retained', 'default', 'completed', '{}', 25, 1, 1, 'bench', now(), now(), now()
		FROM generate_series(1, %d)`, o.retained),
		"VACUUM ANALYZE leasehold_job",
		// The load writes gigabytes of WAL and leaves a checkpoint writing
		// them out for minutes; the claims without the rows ran on a quiet
		// disk, so these must too.
		"CHECKPOINT"); err != nil {
		return err
	}
	defer env.exec(context.WithoutCancel(ctx), "TRUNCATE leasehold_job, leasehold_attempt_log") //nolint:errcheck // best effort
	resets := []string{"DELETE FROM leasehold_job WHERE kind <> 'retained'", "TRUNCATE leasehold_attempt_log", "VACUUM leasehold_job"}
	label := fmt.Sprintf("leasehold+%s", humanCount(o.retained))
	h := newHooks()
	e, err := newLeaseholdEngine(label, postgres.New(env.leasehold), leasehold.Config{}, h, poolExec(env.leasehold), resets, "ANALYZE leasehold_job")
	if err != nil {
		return err
	}
	if err := prepareBacklog(ctx, e, 0); err != nil {
		return err
	}
	full, err := claimLatency(ctx, e, exec, claims)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# claim statement latency: %d claims of up to 10 jobs from a backlog of %d, by JobClaim directly\n", claims, claims*10)
	printLatency(out, "claim", []*latencyResult{
		{engine: "leasehold", p50: []float64{empty[0]}, p90: []float64{empty[1]}, p99: []float64{empty[2]}},
		{engine: label, p50: []float64{full[0]}, p90: []float64{full[1]}, p99: []float64{full[2]}},
	})
	for _, rate := range o.rates {
		res := &latencyResult{engine: label}
		for range rounds {
			p, late, _, err := latencyRound(ctx, e, h, rate, dur, nil)
			if err != nil {
				return fmt.Errorf("%s at %d/s: %w", label, rate, err)
			}
			res.add(p, late, max(1, int(float64(rate)*dur.Seconds())))
		}
		fmt.Fprintf(out, "# latency with %d finished jobs retained, %d jobs/s for %s, %d rounds\n", o.retained, rate, dur, rounds)
		printLatency(out, fmt.Sprintf("latency@%d/s", rate), []*latencyResult{res})
	}
	return nil
}

// claimLatency inserts claims*10 jobs through e and times claims claims of
// up to 10 jobs each, finishing each batch untimed.
func claimLatency(ctx context.Context, e engine, exec driver.Executor, claims int) ([3]float64, error) {
	if err := e.insert(ctx, claims*10); err != nil {
		return [3]float64{}, err
	}
	if err := e.analyze(ctx); err != nil {
		return [3]float64{}, err
	}
	times := make([]time.Duration, 0, claims)
	for range claims {
		start := time.Now()
		rows, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Max: 10, Owner: "bench", DefaultLeaseTTL: 30 * time.Second})
		times = append(times, time.Since(start))
		if err != nil {
			return [3]float64{}, fmt.Errorf("claim: %w", err)
		}
		items := make([]*driver.JobFinish, len(rows))
		for i, r := range rows {
			items[i] = &driver.JobFinish{ID: r.ID, Token: r.LeaseToken, State: "completed", Outcome: "completed"}
		}
		if _, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "bench", Items: items}); err != nil {
			return [3]float64{}, fmt.Errorf("finish: %w", err)
		}
	}
	return percentiles(times), nil
}

func humanCount(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// exec runs statements on the leasehold pool in order.
func (env *pgEnv) exec(ctx context.Context, stmts ...string) error {
	for _, q := range stmts {
		if _, err := env.leasehold.Exec(ctx, q); err != nil {
			return fmt.Errorf("%.40s...: %w", strings.TrimSpace(q), err)
		}
	}
	return nil
}
