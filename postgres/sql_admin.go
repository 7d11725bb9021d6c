package postgres

// sqlJobGet reads one job.
const sqlJobGet = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id = $1`

// sqlJobListSelect starts a job listing; JobList appends the conditions its
// filter asks for (jobListBy*) joined with AND, then sqlJobListOrder.
const sqlJobListSelect = `SELECT ` + jobColumns + ` FROM leasehold_job`

// The job listing's conditions, each taking one argument whose number
// JobList substitutes for %d.
const (
	jobListByStates    = `state = ANY($%d::text[])`
	jobListByQueue     = `queue = $%d`
	jobListByKind      = `kind = $%d`
	jobListByUniqueKey = `unique_key = $%d`
	jobListBeforeID    = `id < $%d`
)

// sqlJobListOrder ends a job listing: newest first, at most the argument.
const sqlJobListOrder = ` ORDER BY id DESC LIMIT $%d`

// sqlJobAttempts reads a job's attempt history. Tokens grow with every
// lease, so they order the history.
const sqlJobAttempts = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE job_id = $1 ORDER BY token`

// sqlJobSetState is an operator's state change: $1 id, $2 allowed current
// states, $3 new state, $4 scheduled time or NULL, $5 reset the error and
// expiry counts, $6 note. A running job is never moved: its lease holder
// owns it. A cancellation request is cleared: it was about the lease that
// ended, and an operator who moves the job again wants it to run.
const sqlJobSetState = `
UPDATE leasehold_job SET
	state = $3::text,
	scheduled_at = CASE
		WHEN $4::timestamptz IS NOT NULL THEN $4::timestamptz
		WHEN $3::text = 'available' THEN now()
		ELSE scheduled_at END,
	finalized_at = CASE
		WHEN $3::text IN ('completed', 'discarded', 'cancelled', 'stuck') THEN now()
		END,
	errors = CASE WHEN $5::boolean THEN 0 ELSE errors END,
	expiries = CASE WHEN $5::boolean THEN 0 ELSE expiries END,
	last_error = CASE WHEN $6::text <> '' THEN $6::text ELSE last_error END,
	cancel_requested_at = NULL
WHERE id = $1 AND state = ANY($2::text[]) AND state <> 'running'
RETURNING ` + jobColumns

// sqlJobCountByState counts jobs per queue and state. Each branch names the
// states of one partial index (migration 4 lists them), so that it reads
// that index, not the table: the claimable states the claim index, running
// one of the running indexes, stuck the index of the states off the success
// path, the finished states the retention index (which carries queue and
// state). Together the branches cover every state the table allows.
const sqlJobCountByState = `
SELECT queue, state, count(*) FROM (
	SELECT queue, state FROM leasehold_job WHERE state IN ('available', 'scheduled', 'retryable')
	UNION ALL
	SELECT queue, 'running' FROM leasehold_job WHERE state = 'running'
	UNION ALL
	SELECT queue, 'stuck' FROM leasehold_job WHERE state = 'stuck'
	UNION ALL
	SELECT queue, state FROM leasehold_job WHERE state IN ('completed', 'discarded', 'cancelled')
) AS jobs
GROUP BY queue, state ORDER BY queue, state`

// sqlMigrationTable creates the migration bookkeeping table.
const sqlMigrationTable = `
CREATE TABLE IF NOT EXISTS leasehold_migration (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`

// sqlMigrationApplied lists the applied versions.
const sqlMigrationApplied = `SELECT version FROM leasehold_migration ORDER BY version`

// sqlMigrationInsert and sqlMigrationDelete record a migration applied or
// reverted.
const (
	sqlMigrationInsert = `INSERT INTO leasehold_migration (version, name) VALUES ($1, $2)`
	sqlMigrationDelete = `DELETE FROM leasehold_migration WHERE version = $1`
)
