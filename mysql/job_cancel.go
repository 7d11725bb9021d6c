package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCancelRunningSQL records a cancellation request on a running job
// whose row the transaction has locked, keeping the first request's time.
const jobCancelRunningSQL = `UPDATE leasehold_job
SET cancel_requested_at = COALESCE(cancel_requested_at, ` + nowExpr + `)
WHERE id = ? AND state = 'running'`

// jobCancelRequestedSQL lists the running jobs of owner (?1, ?2) whose
// cancellation was asked for, through the small index on cancel_owner: the
// owner's first 255 characters while such a request is pending, NULL
// otherwise. The whole owner is compared as bytes on the few rows found
// (utf8mb4_bin ignores trailing spaces).
const jobCancelRequestedSQL = `SELECT id, lease_token FROM leasehold_job
WHERE cancel_owner = LEFT(?, 255) AND CAST(lease_owner AS BINARY) = CAST(? AS BINARY)
	AND state = 'running' AND cancel_requested_at IS NOT NULL
ORDER BY id`

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
		if err := q.QueryRowContext(ctx, jobGetLockedSQL, id).Scan(&state); err != nil {
			return translateError(err)
		}
		running = leasetype.JobState(state) == leasetype.JobStateRunning
		if running {
			if _, err := q.ExecContext(ctx, jobCancelRunningSQL, id); err != nil {
				return err
			}
		}
		var err error
		job, err = scanJob(q.QueryRowContext(ctx, jobGetSQL, id))
		return translateError(err)
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
	rows, err := q.QueryContext(ctx, jobCancelRequestedSQL, params.Owner, params.Owner)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, translateError(err))
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
		return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, translateError(err))
	}
	return out, nil
}
