package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobFilterSQL returns the WHERE clause of a job filter and its arguments.
func jobFilterSQL(f *driver.JobFilter) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString(` WHERE TRUE`)
	if len(f.States) > 0 {
		b.WriteString(` AND state IN (` + placeholders(len(f.States)) + `)`)
		for _, s := range f.States {
			args = append(args, string(s))
		}
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
		b.WriteString(` AND created_at < ` + nowExpr + ` - INTERVAL ? MICROSECOND`)
		args = append(args, f.OlderThan.Microseconds())
	}
	return b.String(), args
}

// JobCount counts the jobs that match the filter.
func (e *executor) JobCount(ctx context.Context, params *driver.JobCountParams) (int64, error) {
	q, err := e.read()
	if err != nil {
		return 0, err
	}
	where, args := jobFilterSQL(&params.JobFilter)
	var n int64
	if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM leasehold_job`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count jobs: %w", translateError(err))
	}
	return n, nil
}

// JobBulk applies one bulk batch in one transaction: it selects and locks
// the batch's rows (SELECT ... FOR UPDATE), so each one still matches when
// it is changed, then changes them in one statement. When that statement
// hits a unique key another job holds, InnoDB rolls back the statement
// alone, and the jobs are changed one by one, each under a savepoint,
// skipping those that conflict.
func (e *executor) JobBulk(ctx context.Context, params *driver.JobBulkParams) (*driver.JobBulkResult, error) {
	if err := driver.ValidateJobBulk(params); err != nil {
		return nil, err
	}
	where, args := jobFilterSQL(&params.JobFilter)
	args = append(args, params.AfterID, params.Limit)
	selectSQL := `SELECT id FROM leasehold_job` + where + ` AND state <> 'running' AND id > ? ORDER BY id LIMIT ? FOR UPDATE`
	var res *driver.JobBulkResult
	err := e.write(ctx, func(q querier) error {
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
		if params.Delete {
			if _, err := q.ExecContext(ctx, `DELETE FROM leasehold_job WHERE id IN (`+placeholders(len(ids))+`)`, idArgs(ids)...); err != nil {
				return translateError(err)
			}
			res.IDs = ids
			return nil
		}
		// The dependency rules run here, not in triggers (job_depend.go):
		// the states the jobs with dependents had, read under their locks,
		// tell what each change means to their children.
		before, err := idStates(ctx, q, fmt.Sprintf(jobWithDependentsSQLFormat, placeholders(len(ids))), ids)
		if err != nil {
			return translateError(err)
		}
		propagate := func(changed []int64) error {
			if len(before) == 0 || len(changed) == 0 {
				return nil
			}
			if err := propagateDependencies(ctx, q, changed, func(id int64) leasetype.JobState { return before[id] }); err != nil {
				return fmt.Errorf("propagate to dependents: %w", err)
			}
			return nil
		}
		set := func(ids []int64) error {
			stmt := strings.Replace(jobSetStateSQL, "WHERE id = ?", "WHERE id IN ("+placeholders(len(ids))+")", 1)
			st := string(params.State)
			a := append([]any{nil, nil, st, st, params.ResetErrors, params.ResetErrors, nullString(params.Note), st}, idArgs(ids)...)
			_, err := q.ExecContext(ctx, stmt, a...)
			return translateError(err)
		}
		err = e.d.withSavepoint(ctx, q, func(querier) error { return set(ids) })
		if err == nil {
			res.IDs = ids
			return propagate(ids)
		}
		if !errors.Is(err, driver.ErrUniqueConflict) {
			return err
		}
		for _, id := range ids {
			err := e.d.withSavepoint(ctx, q, func(querier) error { return set([]int64{id}) })
			switch {
			case errors.Is(err, driver.ErrUniqueConflict):
				res.Conflicts = append(res.Conflicts, id)
			case err != nil:
				return err
			default:
				res.IDs = append(res.IDs, id)
			}
		}
		return propagate(res.IDs)
	})
	if err != nil {
		return nil, fmt.Errorf("bulk %s: %w", driver.JobBulkVerb(params), err)
	}
	return res, nil
}
