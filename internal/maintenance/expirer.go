package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// ExpireExecutor is what the Expirer needs of a driver executor.
type ExpireExecutor interface {
	JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error)
}

// Expirer reclaims jobs whose lease expired on the database clock without
// an outcome (a crashed, paused or partitioned worker): it makes them
// available again, or moves them to stuck per their expiry policy or once
// they reach MaxExpiries. The founding text calls it the stuck watcher;
// most of what it does is make jobs available again. Its writes are
// conditional, so every client can run one at once.
type Expirer struct {
	// Exec runs the expiry statement.
	Exec ExpireExecutor
	// Interval is the time between scans.
	Interval time.Duration
	// Limit bounds the jobs reclaimed per statement; a full batch is followed
	// at once by another.
	Limit int
	// MaxExpiries moves a job to stuck after this many expiries (<= 0: no limit).
	MaxExpiries int
	// Logger receives errors.
	Logger *slog.Logger
	// OnExpired is told about each batch reclaimed, with the rows after the change.
	OnExpired func(rows []*leasetype.JobRow)
}

// Run scans until ctx ends.
func (e *Expirer) Run(ctx context.Context) {
	t := time.NewTicker(e.Interval)
	defer t.Stop()
	for {
		e.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce reclaims every expired lease now and returns how many it reclaimed.
func (e *Expirer) RunOnce(ctx context.Context) int {
	total := 0
	for ctx.Err() == nil {
		rows, err := e.Exec.JobExpire(ctx, &driver.JobExpireParams{Limit: e.Limit, MaxExpiries: e.MaxExpiries})
		if err != nil {
			if ctx.Err() == nil {
				e.Logger.Warn("leasehold: reclaim expired leases", "error", err)
			}
			return total
		}
		total += len(rows)
		if len(rows) > 0 && e.OnExpired != nil {
			e.OnExpired(rows)
		}
		if len(rows) < e.Limit {
			return total
		}
	}
	return total
}
