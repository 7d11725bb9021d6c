package maintenance

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// PruneExecutor is what the Pruner needs of a driver executor.
type PruneExecutor interface {
	JobPrune(ctx context.Context, params *driver.JobPruneParams) (int64, error)
	AttemptPrune(ctx context.Context, params *driver.AttemptPruneParams) (int64, error)
	KeyWindowPrune(ctx context.Context, params *driver.KeyWindowPruneParams) (int64, error)
}

// Pruning batches: PruneBatch is the most rows one delete statement
// removes; PruneMaxBatches bounds one round, so a huge backlog is worked
// off over several intervals instead of in one long burst.
const (
	PruneBatch      = 1000
	PruneMaxBatches = 100
)

// Pruner deletes old finished jobs and attempt history while its client
// holds the maintenance leader lease. Each retention is how long rows are
// kept after they finished; a negative one keeps them forever. Stuck jobs
// are never pruned.
type Pruner struct {
	// Exec runs the deletes.
	Exec PruneExecutor
	// Elector holds the maintenance leader lease (role LeaderMaintenance).
	Elector *Elector
	// Completed, Cancelled and Discarded are the retentions of finished
	// jobs by state; Attempts that of attempt rows.
	Completed, Cancelled, Discarded, Attempts time.Duration
	// Interval is the time between rounds.
	Interval time.Duration
	// KeyInterval is the time between steps of the scan of the queues'
	// keys, when Exec keeps them (driver.QueueKeyPruner); each step checks
	// KeyScan keys, going on where the previous one stopped. Zero means 2
	// seconds and 5,000 keys.
	KeyInterval time.Duration
	KeyScan     int
	// Logger receives errors.
	Logger *slog.Logger
	// OnPruned is told how many rows each delete removed.
	OnPruned func(n int64)
}

// Run competes for the leader lease and prunes once per Interval while it
// holds it, until ctx ends; then it resigns.
//
// The keys a backend keeps for its keyed claims (driver.QueueKeyPruner) are
// pruned more often, a step every KeyInterval: a key whose jobs have all
// completed is still visited by every walk of its queue's keys until it is
// deleted, at the cost of its counts, so a queue whose keys come and go
// (one per customer) should not carry a minute of them.
func (p *Pruner) Run(ctx context.Context) {
	defer p.Elector.Resign()
	kp, _ := p.Exec.(driver.QueueKeyPruner)
	keyEvery := p.Interval
	if kp != nil {
		keyEvery = cmp.Or(p.KeyInterval, defaultKeyInterval)
	}
	var lastPrune, lastKeys time.Time
	var after driver.QueueKey
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		if p.Elector.Attempt(ctx) != 0 {
			if time.Since(lastPrune) >= p.Interval {
				lastPrune, lastKeys = time.Now(), time.Now()
				if err := p.RunOnce(ctx); err != nil && ctx.Err() == nil {
					p.Logger.Warn("leasehold: prune finished jobs", "error", err)
				}
			} else if kp != nil && time.Since(lastKeys) >= keyEvery {
				lastKeys = time.Now()
				next, err := p.keyStep(ctx, kp, after)
				if err != nil && ctx.Err() == nil {
					p.Logger.Warn("leasehold: prune queue keys", "error", err)
				}
				after = next
			}
		}
		timer.Reset(min(p.Elector.Wait(), p.Interval, keyEvery))
	}
}

// defaultKeyInterval and defaultKeyScan are the Pruner's KeyInterval and
// KeyScan when zero.
const (
	defaultKeyInterval = 2 * time.Second
	defaultKeyScan     = 5000
)

// keyStep checks the keys after after and returns where the next step
// goes on: the zero key once the scan reached the end.
func (p *Pruner) keyStep(ctx context.Context, kp driver.QueueKeyPruner, after driver.QueueKey) (driver.QueueKey, error) {
	res, err := kp.QueueKeyPrune(ctx, &driver.QueueKeyPruneParams{After: after, Scan: cmp.Or(p.KeyScan, defaultKeyScan)})
	if err != nil {
		return driver.QueueKey{}, err
	}
	if p.OnPruned != nil {
		p.OnPruned(res.Deleted)
	}
	if res.Next == nil {
		return driver.QueueKey{}, nil
	}
	return *res.Next, nil
}

// RunOnce prunes one round, whether or not this client is leader: each
// finished state on its own retention, then the attempt history.
func (p *Pruner) RunOnce(ctx context.Context) error {
	byAge := map[time.Duration][]leasetype.JobState{}
	for state, keep := range map[leasetype.JobState]time.Duration{
		leasetype.JobStateCompleted: p.Completed,
		leasetype.JobStateCancelled: p.Cancelled,
		leasetype.JobStateDiscarded: p.Discarded,
	} {
		if keep >= 0 {
			byAge[keep] = append(byAge[keep], state)
		}
	}
	for keep, states := range byAge {
		err := p.batches(ctx, func() (int64, error) {
			return p.Exec.JobPrune(ctx, &driver.JobPruneParams{States: states, OlderThan: keep, Limit: PruneBatch})
		})
		if err != nil {
			return err
		}
	}
	if p.Attempts >= 0 {
		err := p.batches(ctx, func() (int64, error) {
			return p.Exec.AttemptPrune(ctx, &driver.AttemptPruneParams{OlderThan: p.Attempts, Limit: PruneBatch})
		})
		if err != nil {
			return err
		}
	}
	// Per-key rate windows that ended hold nothing a claim reads.
	err := p.batches(ctx, func() (int64, error) {
		return p.Exec.KeyWindowPrune(ctx, &driver.KeyWindowPruneParams{Limit: PruneBatch})
	})
	if err != nil {
		return err
	}
	// Nor do the keys a backend keeps for queues whose jobs have all
	// completed (or were pruned): one whole scan, in steps.
	kp, ok := p.Exec.(driver.QueueKeyPruner)
	if !ok {
		return nil
	}
	var after driver.QueueKey
	for range PruneMaxBatches {
		next, err := p.keyStep(ctx, kp, after)
		if err != nil {
			return err
		}
		if next == (driver.QueueKey{}) || ctx.Err() != nil {
			return nil
		}
		after = next
	}
	return nil
}

func (p *Pruner) batches(ctx context.Context, del func() (int64, error)) error {
	for range PruneMaxBatches {
		n, err := del()
		if err != nil {
			return err
		}
		if p.OnPruned != nil {
			p.OnPruned(n)
		}
		if n < PruneBatch || ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
