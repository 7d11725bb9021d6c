package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobSetStateSQL is an operator's state change of a job that is not
// running. ?1 id, ?2 new state, ?3 scheduled_at or NULL, ?4 reset errors,
// ?5 note or NULL, ?6 JSON array of the states it may move from. It clears
// a cancellation request left by the job's last run: a job retried by hand
// must run.
const jobSetStateSQL = `UPDATE leasehold_job
SET state = ?2,
	scheduled_at = CASE
		WHEN ?3 IS NOT NULL THEN ?3
		WHEN ?2 = 'available' THEN ` + nowExpr + `
		ELSE scheduled_at END,
	finalized_at = CASE WHEN ?2 IN ` + finalizedStates + ` THEN ` + nowExpr + ` END,
	errors = CASE WHEN ?4 THEN 0 ELSE errors END,
	expiries = CASE WHEN ?4 THEN 0 ELSE expiries END,
	last_error = coalesce(?5, last_error),
	cancel_requested_at = NULL
WHERE id = ?1 AND state <> 'running'
	AND state IN (SELECT value FROM json_each(?6))
RETURNING ` + jobColumns

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
		job, err = scanJob(q.QueryRowContext(ctx, jobSetStateSQL, params.ID, string(params.State),
			micros(params.ScheduledAt), params.ResetErrors, nullString(params.Note), string(fromJSON)))
		if err == nil {
			changed = true
			return nil
		}
		if err = translateError(err); errors.Is(err, driver.ErrUniqueConflict) {
			return driver.ErrUniqueConflict
		}
		if !errors.Is(err, driver.ErrNotFound) {
			return err
		}
		changed = false
		job, err = scanJob(q.QueryRowContext(ctx, jobGetSQL, params.ID))
		return translateError(err)
	})
	if err != nil {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, err)
	}
	return job, changed, nil
}
