package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobBulkUpdateSQL is a bulk batch's state change, the same as
// jobSetStateSQL's for many IDs. ?1 JSON array of the IDs, ?2 new state,
// ?3 reset errors, ?4 note or NULL, ?5 JSON array of the states the jobs
// may move from (empty: any).
const jobBulkUpdateSQL = `UPDATE leasehold_job
SET state = ?2,
	scheduled_at = CASE WHEN ?2 = 'available' THEN ` + nowExpr + ` ELSE scheduled_at END,
	finalized_at = CASE WHEN ?2 IN ` + finalizedStates + ` THEN ` + nowExpr + ` END,
	errors = CASE WHEN ?3 THEN 0 ELSE errors END,
	expiries = CASE WHEN ?3 THEN 0 ELSE expiries END,
	last_error = coalesce(?4, last_error),
	cancel_requested_at = NULL
WHERE id IN (SELECT value FROM json_each(?1)) AND state <> 'running'
	AND (json_array_length(?5) = 0 OR state IN (SELECT value FROM json_each(?5)))
RETURNING id`

// jobBulkDeleteSQL deletes a bulk batch's jobs. ?1 JSON array of the IDs,
// ?2 JSON array of the states they may be in (empty: any but running).
const jobBulkDeleteSQL = `DELETE FROM leasehold_job
WHERE id IN (SELECT value FROM json_each(?1)) AND state <> 'running'
	AND (json_array_length(?2) = 0 OR state IN (SELECT value FROM json_each(?2)))
RETURNING id`

// jobFilterSQL returns the WHERE clause of a job filter and its arguments.
func jobFilterSQL(f *driver.JobFilter) (string, []any, error) {
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString(` WHERE 1`)
	if len(f.States) > 0 {
		states, err := json.Marshal(f.States)
		if err != nil {
			return "", nil, fmt.Errorf("encode states: %w", err)
		}
		b.WriteString(` AND state IN (SELECT value FROM json_each(?))`)
		args = append(args, string(states))
	}
	if f.Queue != "" {
		b.WriteString(` AND queue = ?`)
		args = append(args, f.Queue)
	}
	if f.Kind != "" {
		b.WriteString(` AND kind = ?`)
		args = append(args, f.Kind)
	}
	if f.OlderThan > 0 {
		b.WriteString(` AND created_at < ` + nowExpr + ` - ?`)
		args = append(args, f.OlderThan.Microseconds())
	}
	return b.String(), args, nil
}

// JobCount counts the jobs that match the filter.
func (e *executor) JobCount(ctx context.Context, params *driver.JobCountParams) (int64, error) {
	q, err := e.read()
	if err != nil {
		return 0, err
	}
	where, args, err := jobFilterSQL(&params.JobFilter)
	if err != nil {
		return 0, fmt.Errorf("count jobs: %w", err)
	}
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM leasehold_job`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs: %w", translateError(err))
	}
	return n, nil
}

// JobBulk applies one bulk batch in one write transaction: it selects the
// batch's IDs, then changes them in one statement. When that statement
// hits a unique key another job holds, it is rolled back to its savepoint
// and the jobs are changed one by one, each under a savepoint of its own,
// skipping those that conflict.
func (e *executor) JobBulk(ctx context.Context, params *driver.JobBulkParams) (*driver.JobBulkResult, error) {
	if err := driver.ValidateJobBulk(params); err != nil {
		return nil, err
	}
	where, args, err := jobFilterSQL(&params.JobFilter)
	if err != nil {
		return nil, fmt.Errorf("bulk %s: %w", driver.JobBulkVerb(params), err)
	}
	args = append(args, params.AfterID, params.Limit)
	selectSQL := `SELECT id FROM leasehold_job` + where + ` AND state <> 'running' AND id > ? ORDER BY id LIMIT ?`
	states := params.States
	if states == nil {
		states = []leasetype.JobState{}
	}
	fromJSON, err := json.Marshal(states)
	if err != nil {
		return nil, fmt.Errorf("bulk %s: encode states: %w", driver.JobBulkVerb(params), err)
	}
	var res *driver.JobBulkResult
	err = e.write(ctx, func(q querier) error {
		res = &driver.JobBulkResult{IDs: []int64{}}
		rows, err := q.QueryContext(ctx, selectSQL, args...)
		if err != nil {
			return translateError(err)
		}
		ids, err := sqlbackend.ScanIDs(rows)
		if err != nil {
			return translateError(err)
		}
		res.Examined = len(ids)
		if len(ids) == 0 {
			return nil
		}
		res.LastID = ids[len(ids)-1]
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if params.Delete {
			rows, err := q.QueryContext(ctx, jobBulkDeleteSQL, string(idsJSON), string(fromJSON))
			if err != nil {
				return translateError(err)
			}
			res.IDs, err = sqlbackend.ScanIDs(rows)
			slices.Sort(res.IDs)
			return translateError(err)
		}
		err = withSavepoint(ctx, q, "leasehold_bulk", func(q querier) error {
			rows, err := q.QueryContext(ctx, jobBulkUpdateSQL, string(idsJSON), string(params.State),
				params.ResetErrors, nullString(params.Note), string(fromJSON))
			if err != nil {
				return translateError(err)
			}
			changed, err := sqlbackend.ScanIDs(rows)
			if err != nil {
				return translateError(err)
			}
			slices.Sort(changed)
			res.IDs = changed
			return nil
		})
		if !errors.Is(err, driver.ErrUniqueConflict) {
			return err
		}
		// One by one, skipping the jobs whose key is held.
		res.IDs = []int64{}
		for _, id := range ids {
			one, _ := json.Marshal([]int64{id})
			err := withSavepoint(ctx, q, "leasehold_bulk_one", func(q querier) error {
				rows, err := q.QueryContext(ctx, jobBulkUpdateSQL, string(one), string(params.State),
					params.ResetErrors, nullString(params.Note), string(fromJSON))
				if err != nil {
					return translateError(err)
				}
				changed, err := sqlbackend.ScanIDs(rows)
				if err != nil {
					return translateError(err)
				}
				res.IDs = append(res.IDs, changed...)
				return nil
			})
			if errors.Is(err, driver.ErrUniqueConflict) {
				res.Conflicts = append(res.Conflicts, id)
				continue
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bulk %s: %w", driver.JobBulkVerb(params), err)
	}
	return res, nil
}
