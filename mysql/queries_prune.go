package mysql

// SQL for retention: deleting old finished jobs and attempt rows. As
// everywhere in the package, a locking read picks the rows (with LIMIT and
// SKIP LOCKED, so concurrent pruners share the work) and the DELETE names
// them by primary key: a DELETE ... ORDER BY ... LIMIT would be
// nondeterministic under statement-based replication.

// jobPrunePick locks up to ?3 jobs in the states of the %s (placeholders
// after ?1) finalized more than ?1 microseconds before the database clock,
// oldest first, through the index on final_at (finalized_at while the job
// is completed, discarded or cancelled; NULL otherwise). Arguments: age in
// microseconds, the states, the limit.
const jobPrunePick = `SELECT id FROM leasehold_job
WHERE final_at < ` + sqlNow + ` - INTERVAL ? MICROSECOND AND state IN (%s)
ORDER BY final_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// jobPruneDelete deletes the picked jobs (the %s: their IDs).
const jobPruneDelete = `DELETE FROM leasehold_job WHERE id IN (%s)`

// queryAttemptPrunePick locks up to ?2 attempt rows that finished more than
// ?1 microseconds before the database clock, oldest first, through the index
// on finished_at.
const queryAttemptPrunePick = `SELECT job_id, token FROM leasehold_attempt
WHERE finished_at < ` + sqlNow + ` - INTERVAL ? MICROSECOND
ORDER BY finished_at
LIMIT ?
FOR UPDATE SKIP LOCKED`

// attemptPruneDelete deletes the picked attempt rows (the %s: (job_id,
// token) pairs).
const attemptPruneDelete = `DELETE FROM leasehold_attempt WHERE (job_id, token) IN (%s)`
