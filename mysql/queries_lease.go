package mysql

import "fmt"

// SQL for the lease life cycle: claim, heartbeat, finish, expire. Each is a
// locking read that applies the whole condition and locks the rows it
// returns, then writes to exactly those rows in the same transaction, on the
// database clock the locking read returned.

// jobClaimableExists tells whether queue ?1 has a claimable job and is not
// paused, so an empty or paused queue is polled with one read and no
// transaction. The %s is the claim's kind filter (claimKindFilter), empty
// for a plain claim; its arguments follow the two queue names.
const jobClaimableExists = `SELECT 1 FROM leasehold_job
WHERE claim_queue = ? AND scheduled_at <= ` + sqlNow + `
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL)%s
LIMIT 1`

// jobClaimPick locks up to the last argument's count of claimable jobs of
// queue ?1 (and ?2), in claim order, skipping rows other claimers hold,
// through the claim index on (claim_queue, priority, scheduled_at, id)
// without a sort. The paused check in the subquery is a plain consistent
// read: it locks nothing, so claimers never skip or wait on the queue's
// control row. The %s is the kind filter, as in jobClaimableExists: it
// tests each row the index walk reaches, so the plan stays the same.
const jobClaimPick = `SELECT id, ` + sqlNow + ` FROM leasehold_job
WHERE claim_queue = ? AND scheduled_at <= ` + sqlNow + `
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL)%s
ORDER BY priority, scheduled_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// The plain claim's statements (no kind filter), built once.
var (
	queryJobClaimableExists = fmt.Sprintf(jobClaimableExists, "")
	queryJobClaimPick       = fmt.Sprintf(jobClaimPick, "")
)

// jobClaimUpdate leases the picked jobs. JobClaim fills in the three %s: the
// per-kind TTL expression in microseconds (a CASE on kind, or NULL), the
// stuck-kind test (kind IN (...), or FALSE) and the ID list. Arguments: owner,
// now (twice), the CASE's arguments, the default TTL in microseconds, the
// stuck kinds, the IDs.
const jobClaimUpdate = `UPDATE leasehold_job
SET attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?,
	leased_at = CAST(? AS DATETIME(6)),
	lease_until = CAST(? AS DATETIME(6)) + INTERVAL COALESCE(lease_ttl_ms * 1000, %s, ?) MICROSECOND,
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = IF(%s, 'stuck', 'retry'),
	state = 'running'
WHERE id IN (%s) AND state IN ` + claimableStates

// jsonLeases is the JSON_TABLE of a heartbeat's leases: [{"id", "token",
// "ttl_us"}].
const jsonLeases = `JSON_TABLE(?, '$[*]' COLUMNS (
	l_id BIGINT PATH '$.id',
	l_token BIGINT PATH '$.token',
	l_ttl_us BIGINT PATH '$.ttl_us')) AS l`

// queryJobHeartbeatPick locks the leases of ?1 that are still held: token
// matches, running, not expired.
const queryJobHeartbeatPick = `SELECT j.id, ` + sqlNow + `
FROM ` + jsonLeases + `
JOIN leasehold_job j ON j.id = l.l_id
WHERE j.lease_token = l.l_token AND j.state = 'running' AND j.lease_until > ` + sqlNow + `
FOR UPDATE`

// queryJobHeartbeat renews the leases of the first argument (those the pick
// locked) from the time in the other two. It writes only lease_until, heartbeat_at and heartbeats, none of
// them indexed.
const queryJobHeartbeat = `UPDATE leasehold_job j
JOIN ` + jsonLeases + ` ON j.id = l.l_id
SET j.lease_until = CAST(? AS DATETIME(6)) + INTERVAL l.l_ttl_us MICROSECOND,
	j.heartbeat_at = CAST(? AS DATETIME(6)),
	j.heartbeats = j.heartbeats + 1
WHERE j.lease_token = l.l_token AND j.state = 'running'`

// jsonFinish is the JSON_TABLE of JobFinish's items.
const jsonFinish = `JSON_TABLE(?, '$[*]' COLUMNS (
	f_id BIGINT PATH '$.id',
	f_token BIGINT PATH '$.token',
	f_state VARCHAR(16) PATH '$.state',
	f_outcome VARCHAR(16) PATH '$.outcome',
	f_count_error INT PATH '$.count_error',
	f_error LONGTEXT PATH '$.error',
	f_scheduled_at VARCHAR(32) PATH '$.scheduled_at')) AS f`

// queryJobFinishPick locks the items of ?1 whose lease is still held.
const queryJobFinishPick = `SELECT j.id, ` + sqlNow + `
FROM ` + jsonFinish + `
JOIN leasehold_job j ON j.id = f.f_id
WHERE j.lease_token = f.f_token AND j.state = 'running' AND j.lease_until > ` + sqlNow + `
FOR UPDATE`

// finishCancelled tells whether an item's outcome gives way to a
// cancellation request: the job was asked to stop, and the item would let it
// run again (retryable, available, scheduled). It reads only columns the
// finish does not write, so every assignment may use it.
const finishCancelled = `(j.cancel_requested_at IS NOT NULL AND f.f_state IN ('retryable', 'available', 'scheduled'))`

// finishState is the state an item actually ends in.
const finishState = `IF(` + finishCancelled + `, 'cancelled', f.f_state)`

// queryAttemptInsertFinished appends the attempt rows of the items (those
// the pick locked), finished at a time: arguments time, then items. It runs
// before the state change; the lease fields stay as they were anyway. A
// cancelled job's attempt says cancelled and keeps the item's error text.
const queryAttemptInsertFinished = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT j.id, j.attempt, j.lease_token, COALESCE(j.lease_owner, ''), j.leased_at, j.lease_until,
	j.heartbeat_at, j.heartbeats, CAST(? AS DATETIME(6)),
	IF(` + finishCancelled + `, 'cancelled', f.f_outcome), f.f_error
FROM ` + jsonFinish + `
JOIN leasehold_job j ON j.id = f.f_id
WHERE j.lease_token = f.f_token AND j.state = 'running'`

// queryJobFinish ends the leases of the first argument (those the pick
// locked) at the time in the other three, in finishState. No assignment
// reads a column an earlier one wrote (finishState reads j.cancel_requested_at
// and the item only).
const queryJobFinish = `UPDATE leasehold_job j
JOIN ` + jsonFinish + ` ON j.id = f.f_id
SET j.scheduled_at = CASE
		WHEN ` + finishCancelled + ` THEN j.scheduled_at
		WHEN f.f_state IN ('retryable', 'scheduled') THEN COALESCE(CAST(f.f_scheduled_at AS DATETIME(6)), CAST(? AS DATETIME(6)))
		WHEN f.f_state = 'available' THEN CAST(? AS DATETIME(6))
		ELSE j.scheduled_at END,
	j.errors = j.errors + f.f_count_error,
	j.last_error = COALESCE(f.f_error, j.last_error),
	j.finalized_at = IF(` + finishState + ` IN ` + finalizedStates + `, CAST(? AS DATETIME(6)), NULL),
	j.state = ` + finishState + `
WHERE j.lease_token = f.f_token AND j.state = 'running'`

// expiredStuck decides whether an expired job becomes stuck: its policy says
// so, or its expiries reach MaxExpiries (when > 0). Its two arguments are
// MaxExpiries.
const expiredStuck = `(expiry_policy = 'stuck' OR (? > 0 AND expiries + 1 >= ?))`

// queryJobExpireCandidates finds up to ?1 running jobs whose lease has
// expired, without locking anything: a consistent read over the running
// rows (running_queue is set exactly while a job runs, and indexed). A
// locking read here would lock every running row it examines, expired or
// not, until the watcher's transaction ends, and hold up the heartbeats and
// outcomes of healthy workers.
const queryJobExpireCandidates = `SELECT id FROM leasehold_job
WHERE running_queue IS NOT NULL AND state = 'running' AND lease_until < ` + sqlNow + `
LIMIT ?`

// queryJobExpirePick locks the candidates (the %s: their IDs) that are
// still running with an expired lease, by primary key, skipping rows others
// hold (a finishing worker, a concurrent watcher).
const queryJobExpirePick = `SELECT id, ` + sqlNow + ` FROM leasehold_job
WHERE id IN (%s) AND state = 'running' AND lease_until < ` + sqlNow + `
FOR UPDATE SKIP LOCKED`

// expiredFinal decides whether an expired job leaves the queue instead of
// becoming available: it was asked to stop (it becomes cancelled) or it
// becomes stuck. Its two arguments are MaxExpiries.
const expiredFinal = `(cancel_requested_at IS NOT NULL OR ` + expiredStuck + `)`

// jobExpire reclaims the picked jobs (the %s: their IDs) at now. Arguments:
// MaxExpiries four times, now, MaxExpiries twice, now, the IDs. A job asked
// to stop becomes cancelled, never available or stuck.
// The lease fields stay as they were, for the attempt rows and operators;
// expiries is written last, after the assignments that read it.
const jobExpire = `UPDATE leasehold_job
SET state = CASE
		WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
		WHEN ` + expiredStuck + ` THEN 'stuck'
		ELSE 'available' END,
	scheduled_at = IF(` + expiredFinal + `, scheduled_at, CAST(? AS DATETIME(6))),
	finalized_at = IF(` + expiredFinal + `, CAST(? AS DATETIME(6)), NULL),
	last_error = CONCAT('lease expired: owner ', COALESCE(lease_owner, ''),
		', token ', lease_token,
		', lease until ', DATE_FORMAT(lease_until, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ')),
	expiries = expiries + 1
WHERE id IN (%s) AND state = 'running'`

// jobAttemptInsertExpired appends the lease_expired attempt rows of the jobs
// JobExpire has just reclaimed (the %s: their IDs), finished at the argument.
const jobAttemptInsertExpired = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, COALESCE(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, CAST(? AS DATETIME(6)), 'lease_expired', last_error
FROM leasehold_job
WHERE id IN (%s)`
