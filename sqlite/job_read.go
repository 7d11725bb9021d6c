package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobGetSQL reads one job.
const jobGetSQL = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id = ?1`

// jobListPrefixSQL starts a job listing; sqlbackend.ListJobs adds the
// filters, the order and the limit.
const jobListPrefixSQL = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE 1`

// jobListByStates is a job listing's filter on states, given as one JSON
// array parameter.
const jobListByStates = ` AND state IN (SELECT value FROM json_each(?))`

// jobAttemptsSQL reads a job's attempt history, oldest first.
const jobAttemptsSQL = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE job_id = ?1 ORDER BY token`

// jobAttemptsOfLeasesSQL reads the attempt rows of many leases, each by
// its key (job_id, token), given as one JSON array of [id, token] pairs.
const jobAttemptsOfLeasesSQL = `SELECT ` + attemptColumns + `
FROM leasehold_attempt
WHERE (job_id, token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(?1))
ORDER BY job_id, token`

// jobListSQL is JobList's SQL; the states are one JSON array parameter.
var jobListSQL = sqlbackend.JobListSQL{
	Prefix: jobListPrefixSQL,
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
	job, err := scanJob(q.QueryRowContext(ctx, jobGetSQL, id))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, translateError(err))
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
	if err := driver.ValidateJobAttempts(params); err != nil {
		return nil, err
	}
	jobID := params.JobID
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	if len(params.Leases) > 0 {
		pairs := make([][2]int64, len(params.Leases))
		for i, l := range params.Leases {
			pairs[i] = [2]int64{l.ID, l.Token}
		}
		b, err := json.Marshal(pairs)
		if err != nil {
			return nil, fmt.Errorf("encode leases: %w", err)
		}
		attempts, err := sqlbackend.QueryAll(ctx, q, scanAttempt, jobAttemptsOfLeasesSQL, string(b))
		if err != nil {
			return nil, fmt.Errorf("list attempts of %d leases: %w", len(pairs), err)
		}
		return attempts, nil
	}
	attempts, err := sqlbackend.QueryAll(ctx, q, scanAttempt, jobAttemptsSQL, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, err)
	}
	return attempts, nil
}
