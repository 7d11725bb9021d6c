package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobGetLockedSQL reads one job's state and locks its row.
const jobGetLockedSQL = `SELECT state FROM leasehold_job WHERE id = ? FOR UPDATE`

// jobSetStateSQL is an operator's state change of a job whose row the
// transaction has locked and found movable. Arguments: scheduled_at or NULL
// (twice), the new state (twice), reset errors (twice), note or NULL, the new
// state, id. A cancellation request belongs to the run it was made for, so
// the change clears it. No assignment reads a column an earlier one wrote:
// MySQL applies single-table assignments left to right, MariaDB may apply
// them at once.
const jobSetStateSQL = `UPDATE leasehold_job
SET scheduled_at = CASE
		WHEN ? IS NOT NULL THEN CAST(? AS DATETIME(6))
		WHEN ? = 'available' THEN ` + nowExpr + `
		ELSE scheduled_at END,
	finalized_at = IF(? IN ` + finalizedStates + `, ` + nowExpr + `, NULL),
	errors = IF(?, 0, errors),
	expiries = IF(?, 0, expiries),
	last_error = COALESCE(?, last_error),
	cancel_requested_at = NULL,
	state = ?
WHERE id = ? AND state <> 'running'`

// errSetRunning is returned by JobSetState for the running state, which only
// a claim may grant.
var errSetRunning = errors.New("leasehold/mysql: a job becomes running only by a claim")

// JobSetState moves a job that is not running from one of params.FromStates
// to params.State, in one transaction: a locking read of the job's state, the
// UPDATE when the state allows it (the row cannot change in between), and a
// read of the row.
func (e *executor) JobSetState(ctx context.Context, params *driver.JobSetStateParams) (*leasetype.JobRow, bool, error) {
	if params.State == leasetype.JobStateRunning {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, errSetRunning)
	}
	if !params.State.Valid() {
		return nil, false, fmt.Errorf("set state of job %d: unknown state %q", params.ID, params.State)
	}
	var (
		job     *leasetype.JobRow
		changed bool
	)
	err := e.write(ctx, func(q querier) error {
		changed = false
		var state string
		if err := q.QueryRowContext(ctx, jobGetLockedSQL, params.ID).Scan(&state); err != nil {
			return translateError(err)
		}
		current := leasetype.JobState(state)
		if current != leasetype.JobStateRunning && slices.Contains(params.FromStates, current) {
			_, err := q.ExecContext(ctx, jobSetStateSQL,
				timeArg(params.ScheduledAt), timeArg(params.ScheduledAt),
				string(params.State), string(params.State),
				params.ResetErrors, params.ResetErrors, nullString(params.Note),
				string(params.State), params.ID)
			if err = translateError(err); errors.Is(err, driver.ErrUniqueConflict) {
				return driver.ErrUniqueConflict
			}
			if err != nil {
				return err
			}
			// Not RowsAffected: a change that writes every column's own value
			// back counts no rows (without clientFoundRows), yet it happened.
			changed = true
			if err := propagateDependencies(ctx, q, []int64{params.ID}, func(int64) leasetype.JobState { return current }); err != nil {
				return err
			}
		}
		var err error
		job, err = scanJob(q.QueryRowContext(ctx, jobGetSQL, params.ID))
		return translateError(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, err)
	}
	return job, changed, nil
}
