package sqlite

// SQL for the lease life cycle: claim, heartbeat, finish, expire.

// claimUpdate starts the claim statements, up to the inner query's filters:
// it leases up to ?6 claimable jobs of queue ?5 in one statement; SQLite has
// one writer, so no other claimer can see the same rows. ?1 owner, ?2 JSON
// object of lease TTLs in ms by kind, ?3 default TTL in ms, ?4 JSON array of
// the kinds whose expiry policy is stuck. The inner query's state list
// matches the partial claim index.
const claimUpdate = `UPDATE leasehold_job
SET state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?1,
	leased_at = ` + sqlNow + `,
	lease_until = ` + sqlNow + ` + 1000 * coalesce(
		lease_ttl_ms,
		(SELECT t.value FROM json_each(?2) AS t WHERE t.key = leasehold_job.kind),
		?3),
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = CASE
		WHEN leasehold_job.kind IN (SELECT s.value FROM json_each(?4) AS s) THEN 'stuck'
		ELSE 'retry' END
WHERE id IN (
	SELECT id FROM leasehold_job
	WHERE state IN ('available', 'scheduled', 'retryable')
		AND queue = ?5 AND scheduled_at <= ` + sqlNow + `
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?5 AND q.paused_at IS NOT NULL)`

// claimOrder ends the claim statements.
const claimOrder = `
	ORDER BY priority, scheduled_at, id
	LIMIT ?6)
RETURNING ` + jobColumns

// queryJobClaim is the plain claim, every kind of the queue. It is kept
// apart from queryJobClaimKinds so that the common claim carries no kind
// filter at all.
const queryJobClaim = claimUpdate + claimOrder

// claimKindFilter restricts a claim to the kinds of the JSON array ?7 (when
// not empty) and never takes those of ?8. The unary + keeps the planner on
// the claim index rather than the kind index: it walks the queue in claim
// order and skips the other kinds.
const claimKindFilter = `
		AND (json_array_length(?7) = 0 OR +kind IN (SELECT value FROM json_each(?7)))
		AND +kind NOT IN (SELECT value FROM json_each(?8))`

// queryJobClaimKinds is the claim of JobClaimParams with Kinds or
// ExcludeKinds: queryJobClaim with claimKindFilter.
const queryJobClaimKinds = claimUpdate + claimKindFilter + claimOrder

// queryJobHeartbeat renews the leases in ?1, a JSON array of
// {"id", "token", "ttl_ms"}, whose token matches, that are running and not
// expired. It returns the IDs renewed.
const queryJobHeartbeat = `UPDATE leasehold_job
SET lease_until = ` + sqlNow + ` + 1000 * l.ttl_ms,
	heartbeat_at = ` + sqlNow + `,
	heartbeats = heartbeats + 1
FROM (
	SELECT value ->> '$.id' AS job_id, value ->> '$.token' AS token, value ->> '$.ttl_ms' AS ttl_ms
	FROM json_each(?1)
) AS l
WHERE leasehold_job.id = l.job_id
	AND leasehold_job.lease_token = l.token
	AND +leasehold_job.state = 'running'
	AND leasehold_job.lease_until > ` + sqlNow + `
RETURNING leasehold_job.id`

// The unary + on state in queryJobHeartbeat and queryJobFinish keeps the
// planner off the state index, so it walks the JSON array and looks each job
// up by ID rather than matching every running job against the whole array.

// finishState is the state queryJobFinish writes: the item's, except that a
// job whose cancellation was requested never runs again, so an outcome that
// would let it (retryable, available, scheduled) becomes cancelled. SET
// expressions see the row as it was, so each may repeat it.
const finishState = `CASE
		WHEN leasehold_job.cancel_requested_at IS NOT NULL
			AND f.new_state IN ('available', 'scheduled', 'retryable') THEN 'cancelled'
		ELSE f.new_state END`

// queryJobFinish ends the leases in ?1, a JSON array of {"id", "token",
// "state", "count_error", "error", "scheduled_at"} with unique IDs, that are
// still held at ?2, the database clock read once per transaction. It returns
// the IDs written. The lease fields stay as they were, for the attempt rows.
const queryJobFinish = `UPDATE leasehold_job
SET state = ` + finishState + `,
	errors = errors + f.count_error,
	last_error = coalesce(f.new_error, last_error),
	scheduled_at = CASE
		WHEN ` + finishState + ` IN ('available', 'scheduled', 'retryable') THEN coalesce(f.next_run, ?2)
		ELSE leasehold_job.scheduled_at END,
	finalized_at = CASE WHEN ` + finishState + ` IN ` + finalizedStates + ` THEN ?2 END
FROM (
	SELECT value ->> '$.id' AS job_id, value ->> '$.token' AS token,
		value ->> '$.state' AS new_state, value ->> '$.count_error' AS count_error,
		value ->> '$.error' AS new_error, value ->> '$.scheduled_at' AS next_run
	FROM json_each(?1)
) AS f
WHERE leasehold_job.id = f.job_id
	AND leasehold_job.lease_token = f.token
	AND +leasehold_job.state = 'running'
	AND leasehold_job.lease_until > ?2
RETURNING leasehold_job.id`

// queryAttemptInsertFinished appends the attempt rows of the leases JobFinish
// has just ended: ?1 is the JSON array of queryJobFinish restricted to the
// items written, ?2 the finish time. It reads the jobs after the update: one
// that queryJobFinish cancelled instead of the item's state (finishState)
// gets outcome cancelled.
const queryAttemptInsertFinished = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT j.id, j.attempt, j.lease_token, coalesce(j.lease_owner, ''), j.leased_at, j.lease_until,
	j.heartbeat_at, j.heartbeats, ?2,
	CASE WHEN j.state = 'cancelled' AND f.value ->> '$.state' IN ('available', 'scheduled', 'retryable')
		THEN 'cancelled' ELSE f.value ->> '$.outcome' END,
	f.value ->> '$.error'
FROM json_each(?1) AS f
JOIN leasehold_job AS j ON j.id = f.value ->> '$.id'`

// expiredStuck decides, in queryJobExpire, whether an expired job becomes
// stuck: its policy says so, or its expiries reach ?2 (when > 0).
const expiredStuck = `(expiry_policy = 'stuck' OR (?2 > 0 AND expiries + 1 >= ?2))`

// expiredEnds decides, in queryJobExpire, whether an expired job leaves the
// queue: it becomes cancelled (its cancellation was requested) or stuck.
const expiredEnds = `(cancel_requested_at IS NOT NULL OR ` + expiredStuck + `)`

// queryJobExpire reclaims up to ?1 running jobs whose lease ended before ?3,
// the database clock read once per transaction. ?2 is MaxExpiries. A job
// whose cancellation was requested becomes cancelled, never available or
// stuck: it must not run again. The lease fields stay as they were, for the
// attempt rows and for operators.
const queryJobExpire = `UPDATE leasehold_job
SET expiries = expiries + 1,
	state = CASE
		WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
		WHEN ` + expiredStuck + ` THEN 'stuck'
		ELSE 'available' END,
	scheduled_at = CASE WHEN ` + expiredEnds + ` THEN scheduled_at ELSE ?3 END,
	finalized_at = CASE WHEN ` + expiredEnds + ` THEN ?3 END,
	last_error = 'lease expired: owner ' || coalesce(lease_owner, '') || ', token ' || lease_token
WHERE id IN (
	SELECT id FROM leasehold_job
	WHERE state = 'running' AND lease_until < ?3
	ORDER BY lease_until, id
	LIMIT ?1)
RETURNING ` + jobColumns

// queryAttemptInsertExpired appends the lease_expired attempt rows of the
// jobs in ?1 (a JSON array of IDs) that JobExpire has just reclaimed, with
// finished_at ?2.
const queryAttemptInsertExpired = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, coalesce(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, ?2, 'lease_expired', last_error
FROM leasehold_job
WHERE id IN (SELECT value FROM json_each(?1))`

// claimableWhere selects the claimable jobs of queue ?1 for the existence
// checks below.
const claimableWhere = `
WHERE state IN ('available', 'scheduled', 'retryable')
	AND queue = ?1 AND scheduled_at <= ` + sqlNow + `
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?1 AND q.paused_at IS NOT NULL)`

// queryJobClaimableExists tells whether queue ?1 has a claimable job, so an
// empty queue is polled with a read, not a write transaction.
const queryJobClaimableExists = `SELECT 1 FROM leasehold_job` + claimableWhere + `
LIMIT 1`

// queryJobClaimableKindsExists is queryJobClaimableExists for a claim
// restricted to the kinds of the JSON array ?2 (when not empty) and never
// those of ?3, so a queue holding only other kinds is not claimed from.
const queryJobClaimableKindsExists = `SELECT 1 FROM leasehold_job` + claimableWhere + `
	AND (json_array_length(?2) = 0 OR +kind IN (SELECT value FROM json_each(?2)))
	AND +kind NOT IN (SELECT value FROM json_each(?3))
LIMIT 1`

// queryJobExpiredExists tells whether a running job's lease has expired.
const queryJobExpiredExists = `SELECT 1 FROM leasehold_job
WHERE state = 'running' AND lease_until < ` + sqlNow + `
LIMIT 1`
