package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobGetSQL reads one job.
const jobGetSQL = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id = $1`

// jobListSelectSQL starts a job listing; JobList appends the conditions its
// filter asks for (jobListBy*) joined with AND, then jobListOrderSQL.
const jobListSelectSQL = `SELECT ` + jobColumns + ` FROM leasehold_job`

// The job listing's conditions, each taking one argument whose number
// JobList substitutes for %d.
const (
	jobListByStates    = `state = ANY($%d::text[])`
	jobListByQueue     = `queue = $%d`
	jobListByKind      = `kind = $%d`
	jobListByUniqueKey = `unique_key = $%d`
	jobListByKey       = `flow_key = $%d`
	jobListBySequence  = `sequence_key = $%d`
	jobListBeforeID    = `id < $%d`
)

// jobListOrderSQL ends a job listing: newest first, at most the argument.
const jobListOrderSQL = ` ORDER BY id DESC LIMIT $%d`

// jobAttemptsSQL reads a job's attempt history from the leasehold_attempt
// view, whose branches each take the job ID to an index (migration 12).
// Tokens grow with every lease, so they order the history.
const jobAttemptsSQL = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE job_id = $1 ORDER BY token`

// jobAttemptsOfLeasesSQL reads the attempt rows of many leases, each by
// its key (job_id, token): $1 the job IDs, $2 the tokens, pairwise. It
// reads the view's two branches itself, each joined to the keys, so that
// both are probes by primary key: the log's rows, and the completed jobs
// whose row holds the lease (the view's second branch). This is the read
// that confirms CompleteTx commits.
const jobAttemptsOfLeasesSQL = `
WITH lease AS MATERIALIZED (
	SELECT * FROM unnest($1::bigint[], $2::bigint[]) AS t(lease_id, lease_token)
)
SELECT ` + attemptColumns + `
FROM leasehold_attempt_log
WHERE (job_id, token) IN (SELECT lease_id, lease_token FROM lease)
UNION ALL
SELECT j.id, j.attempt, j.lease_token, j.lease_owner, j.leased_at, j.lease_until,
	j.heartbeat_at, j.heartbeats, j.finalized_at, 'completed', ''
FROM lease JOIN leasehold_job j ON j.id = lease.lease_id AND j.lease_token = lease.lease_token
WHERE j.completion_in_row
ORDER BY 1, 3`

// defaultListLimit is JobList's limit when the filter sets none.
const defaultListLimit = 100

func (e *executor) JobGet(ctx context.Context, params *driver.JobGetParams) (*leasetype.JobRow, error) {
	id := params.ID
	job, err := scanJob(e.db.QueryRow(ctx, jobGetSQL, id))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, translateError(err))
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
	if params.Key != "" {
		add(jobListByKey, params.Key)
	}
	if params.Sequence != "" {
		add(jobListBySequence, params.Sequence)
	}
	if params.BeforeID > 0 {
		add(jobListBeforeID, params.BeforeID)
	}
	limit := params.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	var sql strings.Builder
	sql.WriteString(jobListSelectSQL)
	if len(conds) > 0 {
		sql.WriteString(" WHERE ")
		sql.WriteString(strings.Join(conds, " AND "))
	}
	args = append(args, limit)
	fmt.Fprintf(&sql, jobListOrderSQL, len(args))

	rows, err := e.db.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", translateError(err))
	}
	jobs, err := scanJobs(rows, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", translateError(err))
	}
	return jobs, nil
}

func (e *executor) JobAttempts(ctx context.Context, params *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	if len(params.Leases) > 0 {
		return e.jobAttemptsOfLeases(ctx, params)
	}
	jobID := params.JobID
	rows, err := e.db.Query(ctx, jobAttemptsSQL, jobID)
	if err != nil {
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, translateError(err))
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
		return nil, fmt.Errorf("list attempts of job %d: %w", jobID, translateError(err))
	}
	return out, nil
}

// jobAttemptsOfLeases is JobAttempts of params.Leases.
func (e *executor) jobAttemptsOfLeases(ctx context.Context, params *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	ids, tokens, err := leaseArrays(params)
	if err != nil {
		return nil, err
	}
	rows, err := e.db.Query(ctx, jobAttemptsOfLeasesSQL, ids, tokens)
	if err != nil {
		return nil, fmt.Errorf("list attempts of %d leases: %w", len(ids), translateError(err))
	}
	return scanLeaseAttempts(rows, len(ids))
}

// leaseArrays validates params and returns its leases as the ID and token
// arrays jobAttemptsOfLeasesSQL takes.
func leaseArrays(params *driver.JobAttemptsParams) (ids, tokens []int64, err error) {
	if err := driver.ValidateJobAttempts(params); err != nil {
		return nil, nil, err
	}
	ids = make([]int64, len(params.Leases))
	tokens = make([]int64, len(params.Leases))
	for i, l := range params.Leases {
		ids[i], tokens[i] = l.ID, l.Token
	}
	return ids, tokens, nil
}

// scanLeaseAttempts reads the rows of jobAttemptsOfLeasesSQL for n leases
// and closes them.
func scanLeaseAttempts(rows pgx.Rows, n int) ([]*leasetype.AttemptRow, error) {
	defer rows.Close()
	out := make([]*leasetype.AttemptRow, 0, n)
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("scan attempt: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts of %d leases: %w", n, translateError(err))
	}
	return out, nil
}
