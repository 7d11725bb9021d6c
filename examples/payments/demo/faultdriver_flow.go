package demo

import (
	"context"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// A crashed worker client reaches the database through none of its calls:
// the leader leases, schedules, limits and cancellation checks fail too, so
// its leader lease expires as a dead process's would.

func (e *faultExecutor[TTx]) LeaderAttempt(ctx context.Context, p *driver.LeaderParams) (*driver.LeaderRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.LeaderAttempt(ctx, p)
}

func (e *faultExecutor[TTx]) LeaderResign(ctx context.Context, p *driver.LeaderParams) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.Executor.LeaderResign(ctx, p)
}

func (e *faultExecutor[TTx]) PeriodicEnsure(ctx context.Context, p *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.PeriodicEnsure(ctx, p)
}

func (e *faultExecutor[TTx]) PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.PeriodicList(ctx)
}

func (e *faultExecutor[TTx]) JobCancelRequested(ctx context.Context, p *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobCancelRequested(ctx, p)
}

func (e *faultExecutor[TTx]) JobCountRunning(ctx context.Context, p *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobCountRunning(ctx, p)
}

func (e *faultExecutor[TTx]) JobPrune(ctx context.Context, p *driver.JobPruneParams) (int64, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	return e.Executor.JobPrune(ctx, p)
}

func (e *faultExecutor[TTx]) AttemptPrune(ctx context.Context, p *driver.AttemptPruneParams) (int64, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	return e.Executor.AttemptPrune(ctx, p)
}
