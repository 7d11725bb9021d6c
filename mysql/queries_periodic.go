package mysql

// SQL for periodic schedules.

// queryPeriodicEnsure inserts a schedule row, or changes spec and next run
// of an existing one whose spec differs. Arguments: name, spec, next run,
// spec, next run, spec, spec. spec is assigned last: MySQL applies the
// assignments left to right, so the tests before it read the old spec. The
// specs are compared as bytes (utf8mb4_bin ignores trailing spaces).
const queryPeriodicEnsure = `INSERT INTO leasehold_periodic (name, spec, next_run_at, updated_at)
VALUES (?, ?, CAST(? AS DATETIME(6)), ` + sqlNow + `)
ON DUPLICATE KEY UPDATE
	next_run_at = IF(CAST(spec AS BINARY) = CAST(? AS BINARY), next_run_at, CAST(? AS DATETIME(6))),
	updated_at = IF(CAST(spec AS BINARY) = CAST(? AS BINARY), updated_at, ` + sqlNow + `),
	spec = ?`

// periodicColumns are the schedule columns in the order scanPeriodic reads
// them.
const periodicColumns = `name, spec, next_run_at, last_run_at, last_job_id, updated_at`

// queryPeriodicGet reads one schedule row.
const queryPeriodicGet = `SELECT ` + periodicColumns + ` FROM leasehold_periodic WHERE name = ?`

// queryPeriodicList reads every schedule row in name order.
const queryPeriodicList = `SELECT ` + periodicColumns + ` FROM leasehold_periodic ORDER BY name`

// queryPeriodicAdvance moves a schedule to its next slot while its stored
// next run is the one the caller read and the caller's leader lease is held
// and unexpired. Arguments: next, slot, last job ID or NULL, name, from,
// leader name, leader token. updated_at always changes (one microsecond on
// when the clock has not moved), so that a write is never reported as zero
// rows affected, which MySQL counts as changed rather than matched rows.
const queryPeriodicAdvance = `UPDATE leasehold_periodic
SET next_run_at = CAST(? AS DATETIME(6)),
	last_run_at = CAST(? AS DATETIME(6)),
	last_job_id = ?,
	updated_at = GREATEST(` + sqlNow + `, updated_at + INTERVAL 1 MICROSECOND)
WHERE name = ? AND next_run_at = CAST(? AS DATETIME(6))
	AND EXISTS (SELECT 1 FROM leasehold_leader l
		WHERE l.name = ? AND l.token = ? AND l.lease_until > ` + sqlNow + `)`
