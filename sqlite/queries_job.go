package sqlite

// SQL for inserting, reading and administering jobs. Parameters are numbered
// (?1, ?2, ...) so that one value can appear twice.

// sqlNow is the database clock in microseconds since the Unix epoch. SQLite
// keeps 'now' to the millisecond and holds it still within one statement.
const sqlNow = "(CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000)"

// queryNow reads the database clock.
const queryNow = "SELECT " + sqlNow

// jobColumns are the job columns in the order scanJob reads them.
const jobColumns = `id, kind, queue, state, priority, args, metadata, unique_key,
	attempt, max_attempts, errors, expiries, last_error,
	lease_token, lease_owner, leased_at, lease_until, heartbeat_at, heartbeats,
	lease_ttl_ms, expiry_policy, scheduled_at, created_at, finalized_at,
	cancel_requested_at`

// attemptColumns are the attempt columns in the order scanAttempt reads them.
const attemptColumns = `job_id, attempt, token, owner, leased_at, lease_until,
	last_heartbeat_at, heartbeats, finished_at, outcome, error`

// heldKeyPredicate is the predicate of the partial unique index on
// unique_key (migration 3): every unfinished job holds its key, a finished
// one when its unique_finished bit for its state is set. A query repeats it
// verbatim so that the planner proves the index applies.
const heldKeyPredicate = `unique_key IS NOT NULL
	AND (state IN ('available', 'scheduled', 'running', 'retryable', 'stuck')
		OR (state = 'completed' AND unique_finished & 1 <> 0)
		OR (state = 'discarded' AND unique_finished & 2 <> 0)
		OR (state = 'cancelled' AND unique_finished & 4 <> 0))`

// finalizedStates get finalized_at: the final states and stuck.
const finalizedStates = `('completed', 'discarded', 'cancelled', 'stuck')`

// queryJobInsert inserts one job, skipping it when a job holding its unique
// key exists (the partial unique index; an upsert without a conflict target
// covers any unique index). ?1 kind, ?2 queue, ?3 priority, ?4 args, ?5
// metadata, ?6 unique key, ?7 max attempts, ?8 lease TTL in ms, ?9
// scheduled_at or NULL, ?10 now, ?11 the unique_finished bitmask.
const queryJobInsert = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_key, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at, unique_finished)
VALUES (?1, ?2, CASE WHEN ?9 > ?10 THEN 'scheduled' ELSE 'available' END,
	?3, ?4, ?5, ?6, ?7, ?8, coalesce(?9, ?10), ?10, ?11)
ON CONFLICT DO NOTHING
RETURNING ` + jobColumns

// queryJobGetKeyHolder finds the job holding a unique key, by the rule of
// the unique index.
const queryJobGetKeyHolder = `SELECT ` + jobColumns + `
FROM leasehold_job
WHERE unique_key = ?1 AND ` + heldKeyPredicate

// queryJobInsertFast inserts the jobs of ?1, a JSON array of {"kind",
// "queue", "priority", "args", "metadata", "max_attempts", "lease_ttl_ms",
// "scheduled_at", "unique_finished"} with args and metadata as JSON text, in
// one statement whatever their number; ?2 is now.
const queryJobInsertFast = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at, unique_finished)
SELECT p.kind, p.queue,
	CASE WHEN p.scheduled_at > ?2 THEN 'scheduled' ELSE 'available' END,
	p.priority, p.args, p.metadata, p.max_attempts, p.lease_ttl_ms,
	coalesce(p.scheduled_at, ?2), ?2, p.unique_finished
FROM (
	SELECT value ->> '$.kind' AS kind, value ->> '$.queue' AS queue,
		value ->> '$.priority' AS priority, value ->> '$.args' AS args,
		value ->> '$.metadata' AS metadata, value ->> '$.max_attempts' AS max_attempts,
		value ->> '$.lease_ttl_ms' AS lease_ttl_ms, value ->> '$.scheduled_at' AS scheduled_at,
		value ->> '$.unique_finished' AS unique_finished,
		key AS n
	FROM json_each(?1)
) AS p
ORDER BY p.n`

// queryJobGet reads one job.
const queryJobGet = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id = ?1`

// queryJobListPrefix starts a job listing; sqlbackend.ListJobs adds the
// filters, the order and the limit.
const queryJobListPrefix = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE 1`

// jobListByStates is a job listing's filter on states, given as one JSON
// array parameter.
const jobListByStates = ` AND state IN (SELECT value FROM json_each(?))`

// queryJobAttempts reads a job's attempt history, oldest first.
const queryJobAttempts = `SELECT ` + attemptColumns + `
FROM leasehold_attempt WHERE job_id = ?1 ORDER BY token`

// queryJobSetState is an operator's state change of a job that is not
// running. ?1 id, ?2 new state, ?3 scheduled_at or NULL, ?4 reset errors,
// ?5 note or NULL, ?6 JSON array of the states it may move from. It clears
// a cancellation request left by the job's last run: a job retried by hand
// must run.
const queryJobSetState = `UPDATE leasehold_job
SET state = ?2,
	scheduled_at = CASE
		WHEN ?3 IS NOT NULL THEN ?3
		WHEN ?2 = 'available' THEN ` + sqlNow + `
		ELSE scheduled_at END,
	finalized_at = CASE WHEN ?2 IN ` + finalizedStates + ` THEN ` + sqlNow + ` END,
	errors = CASE WHEN ?4 THEN 0 ELSE errors END,
	expiries = CASE WHEN ?4 THEN 0 ELSE expiries END,
	last_error = coalesce(?5, last_error),
	cancel_requested_at = NULL
WHERE id = ?1 AND state <> 'running'
	AND state IN (SELECT value FROM json_each(?6))
RETURNING ` + jobColumns

// queryJobCountByState counts jobs per queue and state, grouped in the
// order of the (state, queue) index so that no sort is needed.
const queryJobCountByState = `SELECT queue, state, count(*)
FROM leasehold_job GROUP BY state, queue`

// Migration bookkeeping.
const (
	queryMigrationCreateTable = `CREATE TABLE IF NOT EXISTS leasehold_migration (
	version    INTEGER PRIMARY KEY,
	name       TEXT    NOT NULL,
	applied_at INTEGER NOT NULL
)`
	queryMigrationApplied = `SELECT version FROM leasehold_migration ORDER BY version`
	queryMigrationInsert  = `INSERT INTO leasehold_migration (version, name, applied_at)
VALUES (?1, ?2, ` + sqlNow + `)`
	queryMigrationDelete = `DELETE FROM leasehold_migration WHERE version = ?1`
)
