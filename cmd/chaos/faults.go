package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// injector injects the faults, one at a time, in an order drawn from the
// seed: every enabled kind once per cycle, each cycle shuffled.
type injector struct {
	cfg     *config
	rng     *rand.Rand
	fleet   *fleet
	tracker *recoveryTracker
	proxies *netProxies // nil on SQLite
	cluster *pgCluster  // nil unless --pg-private
	ha      *haCluster  // nil unless --ha-state
	logf    func(string, ...any)

	mu        sync.Mutex
	failovers []failoverRecord

	kills, pauses, dbRestarts          atomic.Int64
	netLatency, netReset, netBlackhole atomic.Int64
	fencedAfterWake                    atomic.Int64
	errors                             atomic.Int64
	wakeChecks                         sync.WaitGroup
}

func newInjector(cfg *config, f *fleet, t *recoveryTracker, np *netProxies, pc *pgCluster, logf func(string, ...any)) *injector {
	return &injector{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.seed), 0xc4a05)), fleet: f, tracker: t, proxies: np, cluster: pc, logf: logf}
}

// run injects faults until ctx ends or until passes.
func (in *injector) run(ctx context.Context, until time.Time) {
	if len(in.cfg.faults) == 0 {
		return
	}
	if in.ha != nil {
		in.runFailovers(ctx, until.Add(-in.cfg.duration), until)
		return
	}
	var cycle []string
	// Let the workers start and take work before the first fault.
	sleepCtx(ctx, in.cfg.faultEvery+time.Second)
	for ctx.Err() == nil && time.Now().Before(until) {
		if len(cycle) == 0 {
			cycle = append(cycle, in.cfg.faults...)
			in.rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		kind := cycle[0]
		cycle = cycle[1:]
		if err := in.inject(ctx, kind); err != nil && ctx.Err() == nil {
			in.errors.Add(1)
			in.logf("fault %s: %v", kind, err)
		}
		jitter := time.Duration(in.rng.Int64N(int64(in.cfg.faultEvery/2) + 1))
		sleepCtx(ctx, in.cfg.faultEvery+jitter)
	}
}

func (in *injector) inject(ctx context.Context, kind string) error {
	ttl := in.cfg.ttl
	if kind == faultDBRestart {
		_ = in.tracker.snapshot(ctx, kind, "")
		in.logf("fault: Postgres restart in immediate mode")
		if err := in.cluster.restart(ctx); err != nil {
			return err
		}
		in.dbRestarts.Add(1)
		return nil
	}
	p := in.pickBusy(ctx)
	if p == nil {
		return fmt.Errorf("no live worker to hit")
	}
	_ = in.tracker.snapshot(ctx, kind, p.id)
	switch kind {
	case faultKill:
		in.logf("fault: SIGKILL %s (pid %d)", p.id, p.pid())
		if err := p.signal(syscall.SIGKILL); err != nil {
			return err
		}
		in.kills.Add(1)
		p.wait(5 * time.Second)
		sleepCtx(ctx, time.Duration(100+in.rng.IntN(400))*time.Millisecond)
		_, err := in.fleet.start(p.slot)
		return err
	case faultPause:
		// Stopped for longer than its lease: its leases expire on the
		// database clock and others take its jobs. Woken, it must write
		// nothing: every write it tries is refused by the fencing token.
		d := 2*ttl + 500*time.Millisecond
		in.logf("fault: SIGSTOP %s (pid %d) for %s", p.id, p.pid(), d)
		before := p.lastReport().Stats.FencedWrites
		p.setPaused(true)
		if err := p.signal(syscall.SIGSTOP); err != nil {
			p.setPaused(false)
			return err
		}
		in.pauses.Add(1)
		sleepCtx(context.WithoutCancel(ctx), d)
		err := p.signal(syscall.SIGCONT)
		p.setPaused(false)
		in.wakeChecks.Add(1)
		go func() {
			defer in.wakeChecks.Done()
			time.Sleep(2 * time.Second)
			in.fencedAfterWake.Add(p.lastReport().Stats.FencedWrites - before)
		}()
		return err
	case faultLatency:
		// Every reply from Postgres to this worker arrives later than the
		// lease TTL: renewals land too late.
		d := 2 * ttl
		in.logf("fault: latency %s on %s's connections for %s", ttl*3/2, p.id, d)
		return in.withToxic(ctx, p.slot, d, &in.netLatency,
			fmt.Sprintf(`{"name":"chaos_latency","type":"latency","stream":"downstream","attributes":{"latency":%d}}`, (ttl*3/2).Milliseconds()))
	case faultReset:
		// Each connection is reset as soon as the server's next reply
		// arrives: the statement (a COMMIT as often as not) ran, and the
		// worker never learns its outcome.
		d := 500*time.Millisecond + time.Duration(in.rng.IntN(1000))*time.Millisecond
		in.logf("fault: reset after reply on %s's connections for %s", p.id, d)
		return in.withToxic(ctx, p.slot, d, &in.netReset,
			`{"name":"chaos_reset","type":"reset_peer","stream":"downstream","attributes":{"timeout":0}}`)
	case faultBlackhole:
		// Nothing this worker sends reaches Postgres; the connections are
		// closed after longer than the lease TTL.
		d := 2 * ttl
		in.logf("fault: blackhole %s's connections for %s", p.id, d)
		return in.withToxic(ctx, p.slot, d, &in.netBlackhole,
			fmt.Sprintf(`{"name":"chaos_blackhole","type":"timeout","stream":"upstream","attributes":{"timeout":%d}}`, (ttl*3/2).Milliseconds()))
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// pickBusy returns a random live worker that holds leases, waiting up to
// 3 s for one to; failing that, any live worker.
func (in *injector) pickBusy(ctx context.Context) *proc {
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		busy := in.tracker.busyOwners(ctx)
		var candidates []*proc
		for _, p := range in.fleet.current() {
			if p.alive() && !p.isPaused() && busy[p.id] {
				candidates = append(candidates, p)
			}
		}
		if len(candidates) > 0 {
			return candidates[in.rng.IntN(len(candidates))]
		}
		sleepCtx(ctx, 20*time.Millisecond)
	}
	return in.fleet.pick(in.rng)
}

func (in *injector) withToxic(ctx context.Context, slot int, d time.Duration, counter *atomic.Int64, toxic string) error {
	if err := in.proxies.add(slot, toxic); err != nil {
		return err
	}
	counter.Add(1)
	sleepCtx(context.WithoutCancel(ctx), d)
	in.proxies.clear()
	return nil
}

func (in *injector) netFaults() int64 {
	return in.netLatency.Load() + in.netReset.Load() + in.netBlackhole.Load()
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
