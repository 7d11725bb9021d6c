package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobListSQL is JobList's SQL; each state is a parameter of its own.
var jobListSQL = sqlbackend.JobListSQL{
	Prefix: queryJobListPrefix,
	States: func(states []leasetype.JobState) (string, []any, error) {
		args := make([]any, len(states))
		for i, s := range states {
			args[i] = string(s)
		}
		return jobListByStates + placeholders(len(states)) + ")", args, nil
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
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, translate(err))
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
		return nil, fmt.Errorf("list jobs: %w", translate(err))
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
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, translate(err))
	}
	return attempts, nil
}

// JobCountByState counts jobs per queue and state, ordered by queue and state.
func (e *executor) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	counts, err := sqlbackend.QueryAll(ctx, q, sqlbackend.ScanQueueStateCount, queryJobCountByState)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", translate(err))
	}
	return counts, nil
}
