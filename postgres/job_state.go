package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobSetStateSQL is an operator's state change: $1 id, $2 allowed current
// states, $3 new state, $4 scheduled time or NULL, $5 reset the error and
// expiry counts, $6 note. A running job is never moved: its lease holder
// owns it. A cancellation request is cleared: it was about the lease that
// ended, and an operator who moves the job again wants it to run. A
// completed job's row stops holding its lease (completion_in_row):
// migration 12's trigger moves that lease into the attempt log.
const jobSetStateSQL = `
UPDATE leasehold_job SET
	state = $3::text,
	scheduled_at = CASE
		WHEN $4::timestamptz IS NOT NULL THEN $4::timestamptz
		WHEN $3::text = 'available' THEN now()
		ELSE scheduled_at END,
	finalized_at = CASE
		WHEN $3::text IN ('completed', 'discarded', 'cancelled', 'stuck') THEN now()
		END,
	errors = CASE WHEN $5::boolean THEN 0 ELSE errors END,
	expiries = CASE WHEN $5::boolean THEN 0 ELSE expiries END,
	last_error = CASE WHEN $6::text <> '' THEN $6::text ELSE last_error END,
	cancel_requested_at = NULL,
	completion_in_row = false
WHERE id = $1 AND state = ANY($2::text[]) AND state <> 'running'
RETURNING ` + jobColumns

func (e *executor) JobSetState(ctx context.Context, params *driver.JobSetStateParams) (*leasetype.JobRow, bool, error) {
	if !params.State.Valid() || params.State == leasetype.JobStateRunning {
		return nil, false, fmt.Errorf("set state of job %d: cannot move a job to %q", params.ID, params.State)
	}
	from := make([]string, len(params.FromStates))
	for i, s := range params.FromStates {
		from[i] = string(s)
	}
	var at pgtype.Timestamptz
	if params.ScheduledAt != nil {
		at = pgtype.Timestamptz{Time: *params.ScheduledAt, Valid: true}
	}
	job, err := scanJob(e.db.QueryRow(ctx, jobSetStateSQL,
		params.ID, from, string(params.State), at, params.ResetErrors, params.Note))
	if err == nil {
		return job, true, nil
	}
	err = translateError(err)
	if errors.Is(err, driver.ErrUniqueConflict) {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, driver.ErrUniqueConflict)
	}
	if !errors.Is(err, driver.ErrNotFound) {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, err)
	}
	// No row changed: either the job does not exist or it is not in one of
	// the states the caller allowed.
	job, err = e.JobGet(ctx, &driver.JobGetParams{ID: params.ID})
	if err != nil {
		return nil, false, err
	}
	return job, false, nil
}
