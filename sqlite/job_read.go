package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	sqlitedrv "modernc.org/sqlite"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// defaultListLimit is the listing size when JobListParams.Limit is zero.
const defaultListLimit = 100

// JobGet returns one job or driver.ErrNotFound.
func (e *executor) JobGet(ctx context.Context, id int64) (*leasetype.JobRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	job, err := scanJob(q.QueryRowContext(ctx, queryJobGet, id))
	if isNoRows(err) {
		return nil, fmt.Errorf("get job %d: %w", id, driver.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, err)
	}
	return job, nil
}

// JobList returns jobs matching the filter, newest ID first.
func (e *executor) JobList(ctx context.Context, params *driver.JobListParams) ([]*leasetype.JobRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	var args []any
	b.WriteString(queryJobListPrefix)
	if len(params.States) > 0 {
		states, err := json.Marshal(params.States)
		if err != nil {
			return nil, fmt.Errorf("list jobs: encode states: %w", err)
		}
		b.WriteString(jobListByStates)
		args = append(args, string(states))
	}
	for _, f := range []struct {
		sql   string
		value string
	}{
		{jobListByQueue, params.Queue},
		{jobListByKind, params.Kind},
		{jobListByUniqueKey, params.UniqueKey},
	} {
		if f.value != "" {
			b.WriteString(f.sql)
			args = append(args, f.value)
		}
	}
	if params.BeforeID > 0 {
		b.WriteString(jobListBeforeID)
		args = append(args, params.BeforeID)
	}
	limit := params.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	b.WriteString(queryJobListSuffix)
	args = append(args, limit)

	rows, err := q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs, err := scanJobs(rows)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if jobs == nil {
		jobs = []*leasetype.JobRow{}
	}
	return jobs, nil
}

// JobAttempts returns a job's attempt history, oldest first.
func (e *executor) JobAttempts(ctx context.Context, jobID int64) ([]*leasetype.AttemptRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryJobAttempts, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, err)
	}
	defer rows.Close()
	out := []*leasetype.AttemptRow{}
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("list attempts of job %d: %w", jobID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, err)
	}
	return out, nil
}

// JobCountByState counts jobs per queue and state, ordered by queue and state.
func (e *executor) JobCountByState(ctx context.Context) ([]*driver.QueueStateCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryJobCountByState)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := []*driver.QueueStateCount{}
	for rows.Next() {
		var c driver.QueueStateCount
		var state string
		if err := rows.Scan(&c.Queue, &state, &c.Count); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		c.State = leasetype.JobState(state)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	slices.SortFunc(out, func(a, b *driver.QueueStateCount) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.State, b.State))
	})
	return out, nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// sqliteConstraintUnique is SQLite's extended result code
// SQLITE_CONSTRAINT_UNIQUE: a unique index was violated.
const sqliteConstraintUnique = 2067

// isUniqueViolation reports whether err is a unique index violation.
func isUniqueViolation(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code() == sqliteConstraintUnique
}
