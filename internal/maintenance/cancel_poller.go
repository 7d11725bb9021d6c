package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// CancelExecutor is what the CancelPoller needs of a driver executor.
type CancelExecutor interface {
	JobCancelRequested(ctx context.Context, params *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error)
}

// CancelPoller asks the database, while the client holds leases, which of
// its running jobs were cancelled from outside, and reports them. It polls
// on every backend (a small partial index answers it), so the bound —
// Interval plus one round trip — holds without LISTEN/NOTIFY.
type CancelPoller struct {
	// Exec runs the query.
	Exec CancelExecutor
	// Owner is this client's lease owner: only its leases are asked about.
	Owner string
	// Interval is the time between polls; zero or less disables the poller.
	Interval time.Duration
	// Logger receives errors.
	Logger *slog.Logger
	// HoldsLeases reports whether the client holds any lease; the poller
	// asks nothing while it holds none.
	HoldsLeases func() bool
	// OnCancelRequested is told about each running job of this client whose
	// cancellation was asked for, on every poll until the job ends.
	OnCancelRequested func(ref driver.LeaseRef)
}

// Run polls until ctx ends.
func (p *CancelPoller) Run(ctx context.Context) {
	if p.Interval <= 0 {
		return
	}
	ticker := time.NewTicker(p.Interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		p.RunOnce(ctx)
	}
}

// RunOnce polls once and returns how many cancelled jobs it reported.
func (p *CancelPoller) RunOnce(ctx context.Context) int {
	if !p.HoldsLeases() {
		return 0
	}
	refs, err := p.Exec.JobCancelRequested(ctx, &driver.JobCancelRequestedParams{Owner: p.Owner})
	if err != nil {
		if ctx.Err() == nil {
			p.Logger.Warn("leasehold: check for cancelled jobs", "error", err)
		}
		return 0
	}
	for _, ref := range refs {
		p.OnCancelRequested(ref)
	}
	return len(refs)
}
