package mysql

import (
	"context"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobGetSQL reads one job.
const jobGetSQL = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id = ?`

// jobListPrefixSQL starts a job listing; sqlbackend.ListJobs adds the
// filters, the order and the limit.
const jobListPrefixSQL = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE 1 = 1`

// jobListByStates starts a job listing's filter on states; JobList appends
// one parameter per state and ")".
const jobListByStates = ` AND state IN (`

// jobAttemptsSQL reads a job's attempt history. Tokens grow with every
// lease, so they order the history.
const jobAttemptsSQL = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE job_id = ? ORDER BY token`

// jobAttemptsOfLeasesPrefixSQL starts the read of the attempt rows of many
// leases, each by its key (job_id, token); JobAttempts appends one
// jobAttemptsLeaseSQL per lease, joined by commas, then
// jobAttemptsOfLeasesEndSQL.
const (
	jobAttemptsOfLeasesPrefixSQL = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE (job_id, token) IN (`
	jobAttemptsLeaseSQL       = `(?, ?)`
	jobAttemptsOfLeasesEndSQL = `) ORDER BY job_id, token`
)

// jobListSQL is JobList's SQL; each state is a parameter of its own.
var jobListSQL = sqlbackend.JobListSQL{
	Prefix: jobListPrefixSQL,
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
		return nil, fmt.Errorf("list jobs: %w", translateError(err))
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
		read := attemptsOfLeases(params.Leases)
		attempts, err := sqlbackend.QueryAll(ctx, q, scanAttempt, read.query, read.args...)
		if err != nil {
			return nil, fmt.Errorf("list attempts of %d leases: %w", len(params.Leases), translateError(err))
		}
		return attempts, nil
	}
	attempts, err := sqlbackend.QueryAll(ctx, q, scanAttempt, jobAttemptsSQL, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, translateError(err))
	}
	return attempts, nil
}

// attemptsOfLeases is the read of the attempt rows of leases, each by its
// key (jobAttemptsOfLeasesPrefixSQL).
func attemptsOfLeases(leases []driver.LeaseRef) stmt {
	var sql strings.Builder
	sql.WriteString(jobAttemptsOfLeasesPrefixSQL)
	args := make([]any, 0, 2*len(leases))
	for i, l := range leases {
		if i > 0 {
			sql.WriteByte(',')
		}
		sql.WriteString(jobAttemptsLeaseSQL)
		args = append(args, l.ID, l.Token)
	}
	sql.WriteString(jobAttemptsOfLeasesEndSQL)
	return stmt{query: sql.String(), args: args}
}
