package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// JobCancelRunning asks for the cancellation of a running job, in one
// transaction: a locking read of the job's state, the conditional UPDATE
// when it is running (the row cannot change in between), and a read of the
// row. The locking read is what makes "was running" exact: an UPDATE that
// matched nothing would not say whether the job became running just after.
func (e *executor) JobCancelRunning(ctx context.Context, params *driver.JobCancelRunningParams) (*leasetype.JobRow, bool, error) {
	id := params.ID
	var (
		job     *leasetype.JobRow
		running bool
	)
	err := e.write(ctx, func(q querier) error {
		var state string
		if err := q.QueryRowContext(ctx, queryJobGetLocked, id).Scan(&state); err != nil {
			return translate(err)
		}
		running = leasetype.JobState(state) == leasetype.JobStateRunning
		if running {
			if _, err := q.ExecContext(ctx, queryJobCancelRunning, id); err != nil {
				return err
			}
		}
		var err error
		job, err = scanJob(q.QueryRowContext(ctx, queryJobGet, id))
		return translate(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("cancel running job %d: %w", id, err)
	}
	return job, running, nil
}

// JobCancelRequested returns the leases of params.Owner whose job's
// cancellation was asked for, by ID.
func (e *executor) JobCancelRequested(ctx context.Context, params *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryJobCancelRequested, params.Owner, params.Owner)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, translate(err))
	}
	defer rows.Close()
	out := []driver.LeaseRef{}
	for rows.Next() {
		var r driver.LeaseRef
		if err := rows.Scan(&r.ID, &r.Token); err != nil {
			return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, translate(err))
	}
	return out, nil
}
