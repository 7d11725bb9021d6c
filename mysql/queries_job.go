package mysql

import "strings"

// SQL for inserting, reading and administering jobs.

// sqlNow is the database clock. UTC_TIMESTAMP does not depend on the session
// time zone, and holds still within one statement.
const sqlNow = "UTC_TIMESTAMP(6)"

// queryNow reads the database clock.
const queryNow = "SELECT " + sqlNow

// claimableStates are the states of a claimable job (claim_queue is set).
const claimableStates = `('available', 'scheduled', 'retryable')`

// finalizedStates get finalized_at: the final states and stuck.
const finalizedStates = `('completed', 'discarded', 'cancelled', 'stuck')`

// queryJobInsert inserts one job: kind, queue, scheduled_at (for the state),
// priority, args, metadata, unique key, unique_finished, max attempts, lease
// TTL in ms, scheduled_at again (NULL means now). A job whose unique key
// another job holds fails with a duplicate-key error on unique_key_active.
const queryJobInsert = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_key, unique_finished,
	 max_attempts, lease_ttl_ms, scheduled_at, created_at)
VALUES (?, ?, IF(CAST(? AS DATETIME(6)) > ` + sqlNow + `, 'scheduled', 'available'),
	?, ?, ?, ?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), ` + sqlNow + `), ` + sqlNow + `)`

// jobInsertFastRow is one row of queryJobInsertFast, with the same arguments
// as queryJobInsert less the unique key.
const jobInsertFastRow = `(?, ?, IF(CAST(? AS DATETIME(6)) > ` + sqlNow + `, 'scheduled', 'available'),
	?, ?, ?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), ` + sqlNow + `), ` + sqlNow + `)`

// queryJobInsertFast starts a multi-row insert; JobInsertFast appends its
// rows (jobInsertFastRow) separated by commas.
const queryJobInsertFast = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_finished, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at)
VALUES `

// queryJobGetKeyHolder finds the job holding a unique key: the one whose
// unique_key_active is set, by the same rule as the unique index (unfinished,
// or finished in a state its unique_finished names). It is a locking read,
// so it sees the latest committed holder even inside a REPEATABLE READ
// transaction whose snapshot predates it.
const queryJobGetKeyHolder = `SELECT ` + jobColumns + `
FROM leasehold_job WHERE unique_key_active = ? LOCK IN SHARE MODE`

// queryJobGet reads one job.
const queryJobGet = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id = ?`

// queryJobGetLocked reads one job's state and locks its row.
const queryJobGetLocked = `SELECT state FROM leasehold_job WHERE id = ? FOR UPDATE`

// queryJobsByIDs reads jobs by ID; the caller appends the ID list and ")".
const queryJobsByIDs = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id IN (`

// queryJobListPrefix starts a job listing; sqlbackend.ListJobs adds the
// filters, the order and the limit.
const queryJobListPrefix = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE 1 = 1`

// jobListByStates starts a job listing's filter on states; JobList appends
// one parameter per state and ")".
const jobListByStates = ` AND state IN (`

// queryJobAttempts reads a job's attempt history. Tokens grow with every
// lease, so they order the history.
const queryJobAttempts = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE job_id = ? ORDER BY token`

// queryJobSetState is an operator's state change of a job whose row the
// transaction has locked and found movable. Arguments: scheduled_at or NULL
// (twice), the new state (twice), reset errors (twice), note or NULL, the new
// state, id. A cancellation request belongs to the run it was made for, so
// the change clears it. No assignment reads a column an earlier one wrote:
// MySQL applies single-table assignments left to right, MariaDB may apply
// them at once.
const queryJobSetState = `UPDATE leasehold_job
SET scheduled_at = CASE
		WHEN ? IS NOT NULL THEN CAST(? AS DATETIME(6))
		WHEN ? = 'available' THEN ` + sqlNow + `
		ELSE scheduled_at END,
	finalized_at = IF(? IN ` + finalizedStates + `, ` + sqlNow + `, NULL),
	errors = IF(?, 0, errors),
	expiries = IF(?, 0, expiries),
	last_error = COALESCE(?, last_error),
	cancel_requested_at = NULL,
	state = ?
WHERE id = ? AND state <> 'running'`

// queryJobCountByState counts jobs per queue and state.
const queryJobCountByState = `SELECT queue, state, COUNT(*)
FROM leasehold_job GROUP BY queue, state ORDER BY queue, state`

// queryJobThroughput counts ended attempts per queue, minute and outcome,
// scanning the attempt history by its finished_at index.
const queryJobThroughput = `
SELECT j.queue, DATE_FORMAT(a.finished_at, '%Y-%m-%d %H:%i:00') AS minute, a.outcome, COUNT(*)
FROM leasehold_attempt a
JOIN leasehold_job j ON j.id = a.job_id
WHERE a.finished_at >= CAST(? AS DATETIME(6))
GROUP BY j.queue, minute, a.outcome
ORDER BY minute, j.queue, a.outcome`

// queryQueueBacklog measures each queue's claimable backlog on the database
// clock, in microseconds.
const queryQueueBacklog = `
SELECT queue, COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(scheduled_at), ` + sqlNow + `)
FROM leasehold_job
WHERE state IN ` + claimableStates + ` AND scheduled_at <= ` + sqlNow + `
GROUP BY queue
ORDER BY queue`

// Migration bookkeeping.
const (
	queryMigrationCreateTable = `CREATE TABLE IF NOT EXISTS leasehold_migration (
	version    INT          NOT NULL PRIMARY KEY,
	name       VARCHAR(255) NOT NULL,
	applied_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin`
	queryMigrationApplied = `SELECT version FROM leasehold_migration ORDER BY version`
	queryMigrationInsert  = `INSERT INTO leasehold_migration (version, name, applied_at)
VALUES (?, ?, ` + sqlNow + `)`
	queryMigrationDelete = `DELETE FROM leasehold_migration WHERE version = ?`
)

// Queue control.
const (
	// queryQueueSetPaused pauses (1) or resumes (0) a queue, creating its
	// control row when missing: name, paused, paused.
	queryQueueSetPaused = `INSERT INTO leasehold_queue (name, paused_at, updated_at)
VALUES (?, IF(?, ` + sqlNow + `, NULL), ` + sqlNow + `)
ON DUPLICATE KEY UPDATE
	paused_at = IF(?, COALESCE(paused_at, ` + sqlNow + `), NULL),
	updated_at = ` + sqlNow
	queryQueueList = `SELECT name, paused_at, updated_at FROM leasehold_queue ORDER BY name`
)

// placeholders returns n comma-separated placeholders.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// idArgs converts IDs to statement arguments.
func idArgs(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
