package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCancelRunningSQL asks for the cancellation of running job $1. A request
// already made keeps its time. The lease holder finds it through
// jobCancelRequestedSQL; JobFinish and JobExpire then end the job cancelled.
const jobCancelRunningSQL = `
UPDATE leasehold_job SET cancel_requested_at = coalesce(cancel_requested_at, now())
WHERE id = $1 AND state = 'running'
RETURNING ` + jobColumns

// jobCancelRequestedSQL lists the leases of owner $1 whose cancellation was
// asked for, through the small partial index on exactly that predicate,
// in id order (leasehold_job_cancel_requested_idx, migration 11).
const jobCancelRequestedSQL = `
SELECT id, lease_token FROM leasehold_job
WHERE state = 'running' AND cancel_requested_at IS NOT NULL AND lease_owner = $1
ORDER BY id`

func (e *executor) JobCancelRunning(ctx context.Context, params *driver.JobCancelRunningParams) (*leasetype.JobRow, bool, error) {
	id := params.ID
	job, err := scanJob(e.db.QueryRow(ctx, jobCancelRunningSQL, id))
	if err == nil {
		return job, true, nil
	}
	if err = translateError(err); !errors.Is(err, driver.ErrNotFound) {
		return nil, false, fmt.Errorf("cancel running job %d: %w", id, err)
	}
	// No row changed: the job does not exist or is not running. A fresh
	// read (a new snapshot) shows which, and the row as it is now.
	job, err = e.JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return nil, false, err
	}
	return job, false, nil
}

func (e *executor) JobCancelRequested(ctx context.Context, params *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	rows, err := e.db.Query(ctx, jobCancelRequestedSQL, params.Owner)
	if err != nil {
		return nil, fmt.Errorf("list cancel requests of %s: %w", params.Owner, translateError(err))
	}
	defer rows.Close()
	out := []driver.LeaseRef{}
	for rows.Next() {
		var ref driver.LeaseRef
		if err := rows.Scan(&ref.ID, &ref.Token); err != nil {
			return nil, fmt.Errorf("scan cancel request: %w", err)
		}
		out = append(out, ref)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list cancel requests of %s: %w", params.Owner, translateError(err))
	}
	return out, nil
}
