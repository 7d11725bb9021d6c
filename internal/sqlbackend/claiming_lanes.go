package sqlbackend

import (
	"context"
	"database/sql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// ClaimingExecutor is an executor that also ends leases, or reads attempt
// rows, and claims jobs in one transaction.
type ClaimingExecutor interface {
	driver.Executor
	driver.FinishClaimer
	driver.AttemptsClaimer
}

// ClaimingLanes is Lanes on connections whose executors are
// ClaimingExecutors: it offers driver.FinishClaimer and
// driver.AttemptsClaimer too, each call on one lane, so that the client
// sends its outcome batches and confirmations with claims there.
type ClaimingLanes struct {
	*Lanes
}

var (
	_ driver.ReservedExecutor = (*ClaimingLanes)(nil)
	_ driver.FinishClaimer    = (*ClaimingLanes)(nil)
	_ driver.AttemptsClaimer  = (*ClaimingLanes)(nil)
)

// OpenClaimingLanes is OpenLanes for executors that are ClaimingExecutors.
func OpenClaimingLanes(ctx context.Context, db *sql.DB, n int, pool driver.Executor, on func(*sql.Conn) ClaimingExecutor) (*ClaimingLanes, error) {
	l, err := OpenLanes(ctx, db, n, pool, func(c *sql.Conn) driver.Executor { return on(c) })
	if err != nil {
		return nil, err
	}
	return &ClaimingLanes{Lanes: l}, nil
}

// JobFinishAndClaim runs on a lane.
func (l *ClaimingLanes) JobFinishAndClaim(ctx context.Context, f *driver.JobFinishParams, c *driver.JobClaimParams) ([]int64, []*leasetype.JobRow, error) {
	var rows []*leasetype.JobRow
	written, err := call(ctx, l.Lanes, func(e driver.Executor) ([]int64, error) {
		written, claimed, err := e.(ClaimingExecutor).JobFinishAndClaim(ctx, f, c)
		rows = claimed
		return written, err
	})
	return written, rows, err
}

// JobAttemptsAndClaim runs on a lane.
func (l *ClaimingLanes) JobAttemptsAndClaim(ctx context.Context, a *driver.JobAttemptsParams, c *driver.JobClaimParams) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	var rows []*leasetype.JobRow
	found, err := call(ctx, l.Lanes, func(e driver.Executor) ([]*leasetype.AttemptRow, error) {
		found, claimed, err := e.(ClaimingExecutor).JobAttemptsAndClaim(ctx, a, c)
		rows = claimed
		return found, err
	})
	return found, rows, err
}
