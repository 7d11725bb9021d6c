package sqlite

// SQL for the lease life cycle: claim, heartbeat, finish, expire.

// queryJobClaim leases up to ?6 claimable jobs of queue ?5 in one statement;
// SQLite has one writer, so no other claimer can see the same rows. ?1
// owner, ?2 JSON object of lease TTLs in ms by kind, ?3 default TTL in ms,
// ?4 JSON array of the kinds whose expiry policy is stuck. The inner query's
// state list matches the partial claim index.
const queryJobClaim = `UPDATE leasehold_job
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
	ORDER BY priority, scheduled_at, id
	LIMIT ?6)
RETURNING ` + jobColumns

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
	AND leasehold_job.state = 'running'
	AND leasehold_job.lease_until > ` + sqlNow + `
RETURNING leasehold_job.id`

// queryJobFinish ends one lease if it is still held: ?1 id, ?2 token, ?3 new
// state, ?4 errors to add, ?5 error or NULL, ?6 scheduled_at or NULL, ?7
// now (read once per transaction). It returns the lease for the attempt row.
const queryJobFinish = `UPDATE leasehold_job
SET state = ?3,
	errors = errors + ?4,
	last_error = coalesce(?5, last_error),
	scheduled_at = CASE
		WHEN ?3 IN ('available', 'scheduled', 'retryable') THEN coalesce(?6, ?7)
		ELSE scheduled_at END,
	finalized_at = CASE WHEN ?3 IN ` + finalizedStates + ` THEN ?7 END
WHERE id = ?1 AND lease_token = ?2 AND state = 'running' AND lease_until > ?7
RETURNING attempt, coalesce(lease_owner, ''), leased_at, lease_until, heartbeat_at, heartbeats`

// queryAttemptInsert appends one attempt row. ?1 job, ?2 attempt, ?3 token,
// ?4 owner, ?5 leased_at, ?6 lease_until, ?7 last heartbeat, ?8 heartbeats,
// ?9 finished_at, ?10 outcome, ?11 error or NULL.
const queryAttemptInsert = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)`

// expiredStuck decides, in queryJobExpire, whether an expired job becomes
// stuck: its policy says so, or its expiries reach ?2 (when > 0).
const expiredStuck = `(expiry_policy = 'stuck' OR (?2 > 0 AND expiries + 1 >= ?2))`

// queryJobExpire reclaims up to ?1 running jobs whose lease ended before ?3,
// the database clock read once per transaction. ?2 is MaxExpiries. The lease
// fields stay as they were, for the attempt rows and for operators.
const queryJobExpire = `UPDATE leasehold_job
SET expiries = expiries + 1,
	state = CASE WHEN ` + expiredStuck + ` THEN 'stuck' ELSE 'available' END,
	scheduled_at = CASE WHEN ` + expiredStuck + ` THEN scheduled_at ELSE ?3 END,
	finalized_at = CASE WHEN ` + expiredStuck + ` THEN ?3 END,
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
