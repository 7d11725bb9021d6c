package leasehold

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// cancelWatcher asks the database, while the client holds leases, which of
// its running jobs were cancelled from outside, and cancels their handlers.
// It polls on every backend (a small partial index answers it), so the
// bound — CancelCheckInterval plus one round trip — holds without
// LISTEN/NOTIFY.
type cancelWatcher struct {
	exec     driver.Executor
	leases   *leaseSet
	owner    string
	interval time.Duration
	logger   *slog.Logger
	stats    *statsCounters
}

func (w *cancelWatcher) run(ctx context.Context) {
	if w.interval <= 0 {
		return
	}
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if !w.leases.any() {
			continue
		}
		refs, err := w.exec.JobCancelRequested(ctx, &driver.JobCancelRequestedParams{Owner: w.owner})
		if err != nil {
			if ctx.Err() == nil {
				w.logger.Warn("leasehold: check for cancelled jobs", "error", err)
			}
			continue
		}
		for _, ref := range refs {
			if l := w.leases.get(ref.ID, ref.Token); l != nil && l.requestCancel() {
				w.stats.cancelRequests.Add(1)
			}
		}
	}
}
