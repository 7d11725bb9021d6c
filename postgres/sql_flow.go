package postgres

// sqlJobCountRunning counts running jobs with an unexpired lease: first row
// the queue $1 (is_queue true), then one row per kind in $2, zero included.
// The running index (id, queue, kind) finds the rows: its scan reads only
// running entries and tests queue or kind on them; the lease test is a
// filter on the rows it yields. The clock is clock_timestamp(), read once: the
// count follows LimitLock in a transaction that may have waited for the
// lock, and leases that expired during the wait hold no slot.
const sqlJobCountRunning = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS run_now)
SELECT true AS is_queue, '' AS kind,
	(SELECT count(*) FROM leasehold_job, clock
	 WHERE state = 'running' AND queue = $1 AND lease_until > clock.run_now)
UNION ALL
SELECT false, k.kind,
	(SELECT count(*) FROM leasehold_job, clock
	 WHERE state = 'running' AND leasehold_job.kind = k.kind AND lease_until > clock.run_now)
FROM unnest($2::text[]) AS k(kind)`

// sqlLimitCreate creates the limit rows of the keys given as parallel arrays
// ($1 scopes, $2 names) that are missing. A concurrent creator of the same
// row makes it wait for that transaction, then skip the row.
const sqlLimitCreate = `
INSERT INTO leasehold_limit (scope, name)
SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (scope, name) DO NOTHING`

// sqlLimitLock locks the limit rows of the keys given as parallel arrays, in
// the order given. ORDER BY is applied below the row locking, so the rows
// are locked in that order: callers that list keys in one order cannot
// deadlock.
const sqlLimitLock = `
SELECT l.scope, l.name, l.window_start, l.window_count
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(key_scope, key_name, ord)
JOIN leasehold_limit l ON l.scope = k.key_scope AND l.name = k.key_name
ORDER BY k.ord
FOR UPDATE OF l`

// sqlClock reads the database clock as it is now, not at the start of the
// transaction (now()).
const sqlClock = `SELECT clock_timestamp()`

// sqlLimitSetWindow records a limit row's rate window.
const sqlLimitSetWindow = `
UPDATE leasehold_limit SET window_start = $3, window_count = $4, updated_at = clock_timestamp()
WHERE scope = $1 AND name = $2`
