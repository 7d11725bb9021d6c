// Package maintenance holds the client's background services, one per file.
package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Watcher is the stuck watcher: it periodically reclaims jobs whose lease
// expired on the database clock without an outcome (a crashed, paused or
// partitioned worker), returning them to available or moving them to stuck
// per their expiry policy. Its writes are conditional, so every client can
// run one at once.
type Watcher struct {
	// Exec runs the expiry statement.
	Exec driver.Executor
	// Interval is the time between scans.
	Interval time.Duration
	// Limit bounds the jobs reclaimed per statement; a full batch is followed
	// at once by another.
	Limit int
	// MaxExpiries moves a job to stuck after this many expiries (<= 0: no limit).
	MaxExpiries int
	// Logger receives errors.
	Logger *slog.Logger
	// OnExpired is told about each batch reclaimed.
	OnExpired func(rows []*leasetype.JobRow)
}

// Run scans until ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.Interval)
	defer t.Stop()
	for {
		w.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce reclaims every expired lease now and returns how many it reclaimed.
func (w *Watcher) RunOnce(ctx context.Context) int {
	total := 0
	for ctx.Err() == nil {
		rows, err := w.Exec.JobExpire(ctx, &driver.JobExpireParams{Limit: w.Limit, MaxExpiries: w.MaxExpiries})
		if err != nil {
			if ctx.Err() == nil {
				w.Logger.Warn("leasehold: reclaim expired leases", "error", err)
			}
			return total
		}
		total += len(rows)
		if len(rows) > 0 && w.OnExpired != nil {
			w.OnExpired(rows)
		}
		if len(rows) < w.Limit {
			return total
		}
	}
	return total
}
