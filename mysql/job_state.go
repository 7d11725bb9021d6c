package mysql

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

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
		if err := q.QueryRowContext(ctx, queryJobGetLocked, params.ID).Scan(&state); err != nil {
			return translate(err)
		}
		current := leasetype.JobState(state)
		if current != leasetype.JobStateRunning && slices.Contains(params.FromStates, current) {
			_, err := q.ExecContext(ctx, queryJobSetState,
				timeArg(params.ScheduledAt), timeArg(params.ScheduledAt),
				string(params.State), string(params.State),
				params.ResetErrors, params.ResetErrors, nullString(params.Note),
				string(params.State), params.ID)
			if isDuplicate(err) {
				return driver.ErrUniqueConflict
			}
			if err != nil {
				return err
			}
			// Not RowsAffected: a change that writes every column's own value
			// back counts no rows (without clientFoundRows), yet it happened.
			changed = true
		}
		var err error
		job, err = scanJob(q.QueryRowContext(ctx, queryJobGet, params.ID))
		return translate(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, err)
	}
	return job, changed, nil
}
