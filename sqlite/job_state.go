package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// errSetRunning is returned by JobSetState for the running state, which only
// a claim may grant.
var errSetRunning = errors.New("leasehold/sqlite: a job becomes running only by a claim")

// JobSetState moves a job that is not running from one of params.FromStates
// to params.State, in one transaction: a conditional UPDATE ... RETURNING,
// then a read of the unchanged row when the condition failed.
func (e *executor) JobSetState(ctx context.Context, params *driver.JobSetStateParams) (*leasetype.JobRow, bool, error) {
	if params.State == leasetype.JobStateRunning {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, errSetRunning)
	}
	if !params.State.Valid() {
		return nil, false, fmt.Errorf("set state of job %d: unknown state %q", params.ID, params.State)
	}
	from := params.FromStates
	if from == nil {
		from = []leasetype.JobState{}
	}
	fromJSON, err := json.Marshal(from)
	if err != nil {
		return nil, false, fmt.Errorf("set state of job %d: encode states: %w", params.ID, err)
	}
	var (
		job     *leasetype.JobRow
		changed bool
	)
	err = e.write(ctx, func(q querier) error {
		job, err = scanJob(q.QueryRowContext(ctx, queryJobSetState, params.ID, string(params.State),
			micros(params.ScheduledAt), params.ResetErrors, nullString(params.Note), string(fromJSON)))
		if err == nil {
			changed = true
			return nil
		}
		if isUniqueViolation(err) {
			return driver.ErrUniqueConflict
		}
		if !isNoRows(err) {
			return err
		}
		changed = false
		job, err = scanJob(q.QueryRowContext(ctx, queryJobGet, params.ID))
		if isNoRows(err) {
			return driver.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, err)
	}
	return job, changed, nil
}
