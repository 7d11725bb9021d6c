package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	sqlitedrv "modernc.org/sqlite"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobListSQL is JobList's SQL; the states are one JSON array parameter.
var jobListSQL = sqlbackend.JobListSQL{
	Prefix: queryJobListPrefix,
	States: func(states []leasetype.JobState) (string, []any, error) {
		b, err := json.Marshal(states)
		if err != nil {
			return "", nil, fmt.Errorf("encode states: %w", err)
		}
		return jobListByStates, []any{string(b)}, nil
	},
}

// JobGet returns one job or driver.ErrNotFound.
func (e *executor) JobGet(ctx context.Context, params *driver.JobGetParams) (*leasetype.JobRow, error) {
	id := params.ID
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
	jobs, err := sqlbackend.ListJobs(ctx, q, &jobListSQL, params, scanJob)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, nil
}

// JobAttempts returns a job's attempt history, oldest first.
func (e *executor) JobAttempts(ctx context.Context, params *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	jobID := params.JobID
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	attempts, err := sqlbackend.QueryAll(ctx, q, scanAttempt, queryJobAttempts, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, err)
	}
	return attempts, nil
}

// JobCountByState counts jobs per queue and state, ordered by queue and state.
func (e *executor) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	out, err := sqlbackend.QueryAll(ctx, q, sqlbackend.ScanQueueStateCount, queryJobCountByState)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	slices.SortFunc(out, func(a, b *leasetype.QueueStateCount) int {
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
