package drivertest

import (
	"context"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// The fault seam covers the flow-control calls too, so that a client cut
// off from the database loses its leader leases and its limited claims as
// it loses its job leases.

func (e *faultExecutor[TTx]) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	e.d.begins.Add(1)
	if faultMode(e.d.mode.Load()) == faultTxOnly {
		return nil, errInjected
	}
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.Begin(ctx)
}

func (e *faultExecutor[TTx]) LeaderAttempt(ctx context.Context, p *driver.LeaderParams) (*driver.LeaderRow, error) {
	if err := e.d.fault(ctx, true); err != nil {
		return nil, err
	}
	return e.Executor.LeaderAttempt(ctx, p)
}

func (e *faultExecutor[TTx]) LeaderResign(ctx context.Context, p *driver.LeaderParams) error {
	if err := e.d.fault(ctx, true); err != nil {
		return err
	}
	return e.Executor.LeaderResign(ctx, p)
}

func (e *faultExecutor[TTx]) PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.PeriodicList(ctx)
}

func (e *faultExecutor[TTx]) JobCancelRequested(ctx context.Context, p *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.JobCancelRequested(ctx, p)
}
