package leasehold

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Retention says how long finished jobs and attempt history are kept. The
// maintenance leader (one client of the fleet at a time, elected through a
// lease row) deletes what is older, in batches. A zero field takes its
// default; a negative one keeps rows forever. Stuck jobs are never pruned:
// they wait for an operator. The attempt history has its own retention, so
// it can outlive the jobs (an audit trail) or be pruned sooner.
type Retention struct {
	// Completed keeps completed jobs this long after they finished; default 24 h.
	Completed time.Duration
	// Cancelled keeps cancelled jobs; default 7 days.
	Cancelled time.Duration
	// Discarded keeps discarded jobs; default 7 days.
	Discarded time.Duration
	// Attempts keeps attempt rows this long after their lease ended; default 30 days.
	Attempts time.Duration
	// Interval is how often the leader prunes; default 1 minute.
	Interval time.Duration
}

const day = 24 * time.Hour

func (r Retention) withDefaults() Retention {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&r.Completed, day)
	def(&r.Cancelled, 7*day)
	def(&r.Discarded, 7*day)
	def(&r.Attempts, 30*day)
	def(&r.Interval, time.Minute)
	return r
}

func (r Retention) validate() error {
	if r.Interval < 0 {
		return fmt.Errorf("retention Interval %s is negative", r.Interval)
	}
	return nil
}

// enabled reports whether anything is ever pruned.
func (r Retention) enabled() bool {
	return r.Completed >= 0 || r.Cancelled >= 0 || r.Discarded >= 0 || r.Attempts >= 0
}

// pruneBatch is the most rows one delete statement removes; pruneMaxBatches
// bounds one round, so a huge backlog is worked off over several intervals
// instead of in one long burst.
const (
	pruneBatch      = 1000
	pruneMaxBatches = 100
)

// pruner deletes old finished jobs and attempts while its client holds the
// maintenance leader lease.
type pruner struct {
	core    *clientCore
	cfg     Retention
	elector *elector
}

func (p *pruner) run(ctx context.Context) {
	defer p.elector.resign()
	lastPrune := time.Time{}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if p.elector.attempt(ctx) != 0 && time.Since(lastPrune) >= p.cfg.Interval {
			lastPrune = time.Now()
			if err := p.prune(ctx); err != nil && ctx.Err() == nil {
				p.core.logger.Warn("leasehold: prune finished jobs", "error", err)
			}
		}
		timer.Reset(min(p.elector.wait(), p.cfg.Interval))
	}
}

// prune runs one round: each finished state on its own retention, then the
// attempt history.
func (p *pruner) prune(ctx context.Context) error {
	byAge := map[time.Duration][]leasetype.JobState{}
	for state, keep := range map[leasetype.JobState]time.Duration{
		leasetype.JobStateCompleted: p.cfg.Completed,
		leasetype.JobStateCancelled: p.cfg.Cancelled,
		leasetype.JobStateDiscarded: p.cfg.Discarded,
	} {
		if keep >= 0 {
			byAge[keep] = append(byAge[keep], state)
		}
	}
	for keep, states := range byAge {
		err := p.batches(ctx, func() (int64, error) {
			return p.core.exec.JobPrune(ctx, &driver.JobPruneParams{States: states, OlderThan: keep, Limit: pruneBatch})
		})
		if err != nil {
			return err
		}
	}
	if p.cfg.Attempts >= 0 {
		return p.batches(ctx, func() (int64, error) {
			return p.core.exec.AttemptPrune(ctx, &driver.AttemptPruneParams{OlderThan: p.cfg.Attempts, Limit: pruneBatch})
		})
	}
	return nil
}

func (p *pruner) batches(ctx context.Context, del func() (int64, error)) error {
	for range pruneMaxBatches {
		n, err := del()
		if err != nil {
			return err
		}
		p.core.stats.pruned.Add(n)
		if n < pruneBatch || ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
