package mysql

// SQL for fleet-wide flow control: running counts and the limit rows a
// limited claim locks.

// jobCountRunningQueue counts the running jobs with an unexpired lease of
// queue ?1 (the row marked 0); jobCountRunningKinds adds those of each kind
// asked for, in every queue (rows marked 1). It reads the running
// indexes (running_queue, running_kind) and checks lease_until on the rows,
// since a heartbeat must touch no index. One statement, so both counts come
// from one consistent read; in READ COMMITTED that read is fresh, and sees
// every claim committed before it.
const jobCountRunningQueue = `SELECT 0, NULL, COUNT(*) FROM leasehold_job
WHERE running_queue = ? AND lease_until > ` + sqlNow

// jobCountRunningKinds is the per-kind part of the count, appended
// with UNION ALL when kinds are asked for; the %s is their placeholders.
const jobCountRunningKinds = `
UNION ALL
SELECT 1, running_kind, COUNT(*) FROM leasehold_job
WHERE running_kind IN (%s) AND lease_until > ` + sqlNow + `
GROUP BY running_kind`

// limitLock creates the limit rows that are missing and locks every row
// named, then reads them and the database clock: two statements sent in one
// round trip (multiStatements), since the lock is held from the first to the
// commit. The first %s is the rows to insert, "(scope, name, 0, now)" each,
// the second the (scope, name) pairs; the keys are literals (sqlText), as a
// statement with placeholders cannot hold two statements without
// interpolateParams.
//
// The INSERT locks the rows one after the other in the order of its rows.
// Its no-op update makes InnoDB take an exclusive lock on a row that exists;
// INSERT IGNORE would take a shared one, and two claimers upgrading their
// shared locks for the read deadlock. The SELECT starts once the INSERT has
// the locks, so its clock is read after them; its FOR UPDATE changes nothing
// then (the locks are held) but says what the read relies on.
const limitLock = `INSERT INTO leasehold_limit (scope, name, window_count, updated_at)
VALUES %s
ON DUPLICATE KEY UPDATE window_count = window_count;
SELECT scope, name, window_start, window_count, ` + sqlNow + `
FROM leasehold_limit
WHERE (scope, name) IN (%s)
FOR UPDATE`

// queryLimitSetWindow records a limit row's rate window: start, count,
// scope, name.
const queryLimitSetWindow = `UPDATE leasehold_limit
SET window_start = CAST(? AS DATETIME(6)), window_count = ?, updated_at = ` + sqlNow + `
WHERE scope = ? AND name = ?`
