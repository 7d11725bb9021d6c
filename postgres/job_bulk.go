package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobBulkUpdateSQL is a bulk batch's state change, the same as
// jobSetStateSQL's for many IDs. $1 the IDs, $2 new state, $3 reset
// errors, $4 note, $5 the states the jobs may move from (empty: any).
// Like jobSetStateSQL it clears completion_in_row.
const jobBulkUpdateSQL = `
UPDATE leasehold_job SET
	state = $2::text,
	scheduled_at = CASE WHEN $2::text = 'available' THEN now() ELSE scheduled_at END,
	finalized_at = CASE
		WHEN $2::text IN ('completed', 'discarded', 'cancelled', 'stuck') THEN now()
		END,
	errors = CASE WHEN $3::boolean THEN 0 ELSE errors END,
	expiries = CASE WHEN $3::boolean THEN 0 ELSE expiries END,
	last_error = CASE WHEN $4::text <> '' THEN $4::text ELSE last_error END,
	cancel_requested_at = NULL,
	completion_in_row = false
WHERE id = ANY($1::bigint[]) AND state <> 'running'
	AND (cardinality($5::text[]) = 0 OR state = ANY($5::text[]))
RETURNING id`

// jobBulkDeleteSQL deletes a bulk batch's jobs. $1 the IDs, $2 the states
// they may be in (empty: any but running).
const jobBulkDeleteSQL = `
DELETE FROM leasehold_job
WHERE id = ANY($1::bigint[]) AND state <> 'running'
	AND (cardinality($2::text[]) = 0 OR state = ANY($2::text[]))
RETURNING id`

// jobFilterSQL returns the WHERE clause of a job filter, its parameters
// numbered from len(args)+1, and the arguments.
func jobFilterSQL(f *driver.JobFilter, args []any) (string, []any) {
	var b strings.Builder
	b.WriteString(` WHERE true`)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if len(f.States) > 0 {
		b.WriteString(` AND state = ANY(` + arg(stateStrings(f.States)) + `::text[])`)
	}
	if f.Queue != "" {
		b.WriteString(` AND queue = ` + arg(f.Queue))
	}
	if f.Kind != "" {
		b.WriteString(` AND kind = ` + arg(f.Kind))
	}
	if f.OlderThan > 0 {
		b.WriteString(` AND created_at < now() - ` + arg(f.OlderThan.Microseconds()) + `::bigint * interval '1 microsecond'`)
	}
	return b.String(), args
}

func stateStrings(states []leasetype.JobState) []string {
	out := make([]string, len(states))
	for i, s := range states {
		out[i] = string(s)
	}
	return out
}

// JobCount counts the jobs that match the filter.
func (e *executor) JobCount(ctx context.Context, params *driver.JobCountParams) (int64, error) {
	where, args := jobFilterSQL(&params.JobFilter, nil)
	var n int64
	if err := e.db.QueryRow(ctx, `SELECT count(*) FROM leasehold_job`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs: %w", translateError(err))
	}
	return n, nil
}

// JobBulk applies one bulk batch in a transaction (a savepoint inside the
// caller's): it selects the batch's IDs, then changes them in one
// statement. When that statement hits a unique key another job holds, it is
// rolled back to its savepoint and the jobs are changed one by one, each
// under a savepoint of its own, skipping those that conflict.
func (e *executor) JobBulk(ctx context.Context, params *driver.JobBulkParams) (*driver.JobBulkResult, error) {
	if err := driver.ValidateJobBulk(params); err != nil {
		return nil, err
	}
	tx, err := e.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("bulk %s: %w", driver.JobBulkVerb(params), err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit a no-op; otherwise the error to report is another
	x := &tx.(*executorTx).executor
	res, err := x.jobBulk(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("bulk %s: %w", driver.JobBulkVerb(params), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("bulk %s: %w", driver.JobBulkVerb(params), err)
	}
	return res, nil
}

func (e *executor) jobBulk(ctx context.Context, params *driver.JobBulkParams) (*driver.JobBulkResult, error) {
	where, args := jobFilterSQL(&params.JobFilter, nil)
	args = append(args, params.AfterID, params.Limit)
	ids, err := e.queryIDs(ctx, "select the batch", `SELECT id FROM leasehold_job`+where+
		fmt.Sprintf(` AND state <> 'running' AND id > $%d ORDER BY id LIMIT $%d`, len(args)-1, len(args)), args...)
	if err != nil {
		return nil, err
	}
	res := &driver.JobBulkResult{IDs: []int64{}, Examined: len(ids)}
	if len(ids) == 0 {
		return res, nil
	}
	res.LastID = ids[len(ids)-1]
	from := stateStrings(params.States)
	if params.Delete {
		res.IDs, err = e.queryIDs(ctx, "delete", jobBulkDeleteSQL, ids, from)
		slices.Sort(res.IDs)
		return res, err
	}
	sp, err := e.Begin(ctx)
	if err != nil {
		return nil, err
	}
	changed, err := (&sp.(*executorTx).executor).queryIDs(ctx, "update", jobBulkUpdateSQL,
		ids, string(params.State), params.ResetErrors, params.Note, from)
	if err == nil {
		slices.Sort(changed)
		res.IDs = changed
		return res, sp.Commit(ctx)
	}
	if rbErr := sp.Rollback(ctx); rbErr != nil {
		return nil, rbErr
	}
	if !errors.Is(err, driver.ErrUniqueConflict) {
		return nil, err
	}
	fromStates := params.States
	if len(fromStates) == 0 {
		fromStates = driver.NotRunningStates()
	}
	for _, id := range ids {
		one, err := e.Begin(ctx)
		if err != nil {
			return nil, err
		}
		_, ok, err := one.JobSetState(ctx, &driver.JobSetStateParams{
			ID: id, FromStates: fromStates, State: params.State, ResetErrors: params.ResetErrors, Note: params.Note,
		})
		switch {
		case errors.Is(err, driver.ErrUniqueConflict):
			res.Conflicts = append(res.Conflicts, id)
			err = one.Rollback(ctx)
		case errors.Is(err, driver.ErrNotFound):
			err = one.Rollback(ctx) // deleted meanwhile
		case err != nil:
			one.Rollback(ctx) //nolint:errcheck // err is the one to report
			return nil, err
		default:
			if ok {
				res.IDs = append(res.IDs, id)
			}
			err = one.Commit(ctx)
		}
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}
