package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// defaultListLimit is JobList's limit when the filter sets none.
const defaultListLimit = 100

func (e *executor) JobGet(ctx context.Context, params *driver.JobGetParams) (*leasetype.JobRow, error) {
	id := params.ID
	job, err := scanJob(e.db.QueryRow(ctx, sqlJobGet, id))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, translate(err))
	}
	return job, nil
}

func (e *executor) JobList(ctx context.Context, params *driver.JobListParams) ([]*leasetype.JobRow, error) {
	// Only the filters in use go into the statement, so that each shape gets
	// a plan that can use the matching index.
	var (
		conds []string
		args  []any
	)
	add := func(cond string, arg any) {
		args = append(args, arg)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if len(params.States) > 0 {
		states := make([]string, len(params.States))
		for i, s := range params.States {
			states[i] = string(s)
		}
		add(jobListByStates, states)
	}
	if params.Queue != "" {
		add(jobListByQueue, params.Queue)
	}
	if params.Kind != "" {
		add(jobListByKind, params.Kind)
	}
	if params.UniqueKey != "" {
		add(jobListByUniqueKey, params.UniqueKey)
	}
	if params.BeforeID > 0 {
		add(jobListBeforeID, params.BeforeID)
	}
	limit := params.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	var sql strings.Builder
	sql.WriteString(sqlJobListSelect)
	if len(conds) > 0 {
		sql.WriteString(" WHERE ")
		sql.WriteString(strings.Join(conds, " AND "))
	}
	args = append(args, limit)
	fmt.Fprintf(&sql, sqlJobListOrder, len(args))

	rows, err := e.db.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", translate(err))
	}
	jobs, err := scanJobs(rows, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", translate(err))
	}
	return jobs, nil
}

func (e *executor) JobAttempts(ctx context.Context, params *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	jobID := params.JobID
	rows, err := e.db.Query(ctx, sqlJobAttempts, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, translate(err))
	}
	defer rows.Close()
	var out []*leasetype.AttemptRow
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("scan attempt of job %d: %w", jobID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, translate(err))
	}
	return out, nil
}

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
	job, err := scanJob(e.db.QueryRow(ctx, sqlJobSetState,
		params.ID, from, string(params.State), at, params.ResetErrors, params.Note))
	if err == nil {
		return job, true, nil
	}
	if isUniqueViolation(err) {
		return nil, false, fmt.Errorf("set state of job %d: %w", params.ID, driver.ErrUniqueConflict)
	}
	if err = translate(err); !errors.Is(err, driver.ErrNotFound) {
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

func (e *executor) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	rows, err := e.db.Query(ctx, sqlJobCountByState)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", translate(err))
	}
	defer rows.Close()
	var out []*leasetype.QueueStateCount
	for rows.Next() {
		var (
			c     leasetype.QueueStateCount
			state string
		)
		if err := rows.Scan(&c.Queue, &state, &c.Count); err != nil {
			return nil, fmt.Errorf("scan job count: %w", err)
		}
		c.State = leasetype.JobState(state)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", translate(err))
	}
	return out, nil
}
