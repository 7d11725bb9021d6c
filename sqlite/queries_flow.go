package sqlite

// SQL for flow control: running counts for concurrency limits, and the limit
// rows that hold rate windows.

// queryJobCountRunningQueue counts the running jobs of queue ?1 whose lease
// has not expired, on the (state, queue) index.
const queryJobCountRunningQueue = `SELECT count(*) FROM leasehold_job
WHERE state = 'running' AND queue = ?1 AND lease_until > ` + sqlNow

// queryJobCountRunningKinds counts, for each kind of the JSON array ?1, the
// running jobs of that kind in every queue whose lease has not expired: one
// row per kind asked, zero included, each counted on the partial
// running-by-kind index.
const queryJobCountRunningKinds = `SELECT k.value, (
	SELECT count(*) FROM leasehold_job
	WHERE state = 'running' AND kind = k.value AND lease_until > ` + sqlNow + `)
FROM json_each(?1) AS k`

// queryLimitInsertMissing creates the limit rows of ?1, a JSON array of
// {"scope", "name"}, that do not exist. The WHERE true lets the parser
// tell the upsert clause from a join constraint.
const queryLimitInsertMissing = `INSERT INTO leasehold_limit (scope, name, updated_at)
SELECT k.value ->> '$.scope', k.value ->> '$.name', ` + sqlNow + `
FROM json_each(?1) AS k
WHERE true
ON CONFLICT (scope, name) DO NOTHING`

// queryLimitRead reads the limit rows of ?1, a JSON array of {"scope",
// "name"}, in the array's order (a key given twice is read twice).
const queryLimitRead = `SELECT l.window_start, l.window_count
FROM json_each(?1) AS k
JOIN leasehold_limit AS l ON l.scope = k.value ->> '$.scope' AND l.name = k.value ->> '$.name'
ORDER BY k.key`

// queryLimitSetWindow records the rate window of limit row (?1, ?2): window
// start ?3, count ?4.
const queryLimitSetWindow = `UPDATE leasehold_limit
SET window_start = ?3, window_count = ?4, updated_at = ` + sqlNow + `
WHERE scope = ?1 AND name = ?2`
