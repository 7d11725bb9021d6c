package sqlite

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCancelRunningSQL asks for cancellation of job ?1 if it is running,
// keeping the time of an earlier request.
const jobCancelRunningSQL = `UPDATE leasehold_job
SET cancel_requested_at = coalesce(cancel_requested_at, ` + nowExpr + `)
WHERE id = ?1 AND state = 'running'
RETURNING ` + jobColumns

// jobCancelRequestedSQL lists the running jobs leased by owner ?1 whose
// cancellation was asked for. Its predicate is the partial cancel index's.
const jobCancelRequestedSQL = `SELECT id, lease_token FROM leasehold_job
WHERE state = 'running' AND cancel_requested_at IS NOT NULL AND lease_owner = ?1
ORDER BY id`

// JobCancelRunning asks for cancellation of a running job in one conditional
// UPDATE ... RETURNING; when the job is not running it reads the unchanged
// row in the same transaction.
func (e *executor) JobCancelRunning(ctx context.Context, params *driver.JobCancelRunningParams) (*leasetype.JobRow, bool, error) {
	id := params.ID
	var (
		job     *leasetype.JobRow
		running bool
	)
	err := e.write(ctx, func(q querier) error {
		var err error
		job, err = scanJob(q.QueryRowContext(ctx, jobCancelRunningSQL, id))
		if err == nil {
			running = true
			return nil
		}
		if !isNoRows(err) {
			return err
		}
		running = false
		job, err = scanJob(q.QueryRowContext(ctx, jobGetSQL, id))
		return translateError(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("cancel running job %d: %w", id, err)
	}
	return job, running, nil
}

// JobCancelRequested returns the running jobs leased by params.Owner whose
// cancellation was asked for, by ID.
func (e *executor) JobCancelRequested(ctx context.Context, params *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, jobCancelRequestedSQL, params.Owner)
	if err != nil {
		return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, err)
	}
	defer rows.Close()
	out := []driver.LeaseRef{}
	for rows.Next() {
		var ref driver.LeaseRef
		if err := rows.Scan(&ref.ID, &ref.Token); err != nil {
			return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, err)
		}
		out = append(out, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list cancellations of %s: %w", params.Owner, err)
	}
	return out, nil
}
