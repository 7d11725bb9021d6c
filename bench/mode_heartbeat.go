package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/postgres"
)

// heartbeatCounter observes every batched renewal.
type heartbeatCounter struct {
	leasehold.MiddlewareDefaults
	statements, leases, errors atomic.Int64
	maxRTT                     atomic.Int64
}

func (c *heartbeatCounter) ObserveHeartbeat(leases int, rtt time.Duration, err error) {
	c.statements.Add(1)
	c.leases.Add(int64(leases))
	if err != nil {
		c.errors.Add(1)
	}
	for {
		cur := c.maxRTT.Load()
		if int64(rtt) <= cur || c.maxRTT.CompareAndSwap(cur, int64(rtt)) {
			break
		}
	}
}

// runHeartbeat holds many long jobs running on one leasehold client and
// measures what keeping their leases costs: renewal statements per second,
// leases per statement, and the CPU of the client's Postgres backends.
func runHeartbeat(ctx context.Context, o *options, out io.Writer) error {
	env, err := setupPostgres(ctx, o.schemaPrefix)
	if err != nil {
		return err
	}
	defer env.close()
	jobs := orDefault(o.jobs, 10_000)
	dur := orDefault(o.duration, 40*time.Second)
	rounds := orDefault(o.rounds, 1)
	h := newHooks()
	counter := &heartbeatCounter{}
	cfg := leasehold.Config{
		LeaseTTL:   o.ttl,
		Queues:     map[string]leasehold.QueueConfig{"default": {MaxWorkers: jobs}},
		Middleware: []leasehold.Middleware{counter},
	}
	e, err := newLeaseholdEngine("leasehold", postgres.New(env.leasehold), cfg, h, poolExec(env.leasehold),
		[]string{"TRUNCATE leasehold_job, leasehold_attempt_log"}, "ANALYZE leasehold_job")
	if err != nil {
		return err
	}
	e.hold = true
	s := &series{engine: "leasehold"}
	var stmts, leases, ours, all, goCPU, lost []float64
	for r := range rounds {
		if err := prepareBacklog(ctx, e, jobs); err != nil {
			return err
		}
		resetPeakRSS()
		var rerr error
		withLabel(ctx, e.name(), func(ctx context.Context) {
			if rerr = e.start(ctx); rerr != nil {
				return
			}
			defer h.release()
			if rerr = waitFor(ctx, time.Minute, func() bool { return e.stats().Claimed >= int64(jobs) }); rerr != nil {
				return
			}
			sleepCtx(ctx, 200*time.Millisecond) // every handler started
			var pids []int
			if pids, rerr = backendPIDs(ctx, env, env.app); rerr != nil {
				return
			}
			st0, n0, l0 := e.stats().HeartbeatStatements, counter.leases.Load(), e.stats().LeasesLost
			u0, ours0 := takeUsage(pgServer), postgresCPU(pids)
			sleepCtx(ctx, dur)
			st1, n1, l1 := e.stats().HeartbeatStatements, counter.leases.Load(), e.stats().LeasesLost
			u1, ours1 := takeUsage(pgServer), postgresCPU(pids)
			secs := u1.at.Sub(u0.at).Seconds()
			perSec := float64(st1-st0) / secs
			stmts = append(stmts, perSec)
			leases = append(leases, float64(n1-n0)/max(float64(st1-st0), 1))
			ours = append(ours, 100*(ours1-ours0).Seconds()/secs)
			all = append(all, 100*u1.pgCPUSince(u0).Seconds()/secs)
			goCPU = append(goCPU, 100*(u1.goCPU-u0.goCPU).Seconds()/secs)
			lost = append(lost, float64(l1-l0))
			s.samples = append(s.samples, sample{value: perSec, peakRSSBytes: peakRSS()})
		})
		if err := e.stop(ctx); rerr == nil {
			rerr = err
		}
		if rerr != nil {
			return fmt.Errorf("heartbeat round %d: %w", r+1, rerr)
		}
	}
	ttl := orDefault(o.ttl, 30*time.Second)
	fmt.Fprintf(out, "# heartbeat: %d jobs running at once on one client, lease TTL %s (renewal due every %s), %s measured, %d round(s)\n",
		jobs, ttl, ttl/3, dur, rounds)
	lo, med, hi := spread(s.values())
	var rss int64
	for _, x := range s.samples {
		rss = max(rss, x.peakRSSBytes)
	}
	fmt.Fprintf(out, "%-12s %-18s renewal statements/s min %.3f  median %.3f  max %.3f | leases per statement %.0f | leases lost %.0f | CPU %% of one core: client backends %.2f, all postgres %.2f, bench process %.2f | max renewal RTT %s | peak RSS %d MiB\n",
		"heartbeat", "leasehold", lo, med, hi, median(leases), median(lost), median(ours), median(all), median(goCPU),
		time.Duration(counter.maxRTT.Load()).Round(time.Microsecond), rss>>20)
	return nil
}

// backendPIDs lists the server processes of the connections named app.
func backendPIDs(ctx context.Context, env *pgEnv, app string) ([]int, error) {
	rows, err := env.raw.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}
