package drivertest

import (
	"context"
	"sync/atomic"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// countingDriver wraps a driver and counts JobClaim calls.
type countingDriver[TTx any] struct {
	driver.Driver[TTx]
	claims atomic.Int64
}

// notifyingCountingDriver is a countingDriver on a driver that can push
// insert notifications.
type notifyingCountingDriver[TTx any] struct {
	*countingDriver[TTx]
	driver.Notifier
}

// countClaims returns d wrapped so that the claims of the clients on it are
// counted, and the count. The wrapper keeps d's Notifier capability.
func countClaims[TTx any](d driver.Driver[TTx]) (driver.Driver[TTx], *atomic.Int64) {
	c := &countingDriver[TTx]{Driver: d}
	if n, ok := driver.NotifierOf(d); ok {
		return &notifyingCountingDriver[TTx]{countingDriver: c, Notifier: n}, &c.claims
	}
	return c, &c.claims
}

func (d *countingDriver[TTx]) GetExecutor() driver.Executor {
	return countingExecutor{Executor: d.Driver.GetExecutor(), claims: &d.claims}
}

func (d *countingDriver[TTx]) UnwrapExecutor(tx TTx) driver.Executor {
	return countingExecutor{Executor: d.Driver.UnwrapExecutor(tx), claims: &d.claims}
}

// countingExecutor counts the JobClaim calls made through it.
type countingExecutor struct {
	driver.Executor
	claims *atomic.Int64
}

func (e countingExecutor) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	e.claims.Add(1)
	return e.Executor.JobClaim(ctx, p)
}
