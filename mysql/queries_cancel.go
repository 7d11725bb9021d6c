package mysql

// SQL for cancelling running jobs.

// queryJobCancelRunning records a cancellation request on a running job
// whose row the transaction has locked, keeping the first request's time.
const queryJobCancelRunning = `UPDATE leasehold_job
SET cancel_requested_at = COALESCE(cancel_requested_at, ` + sqlNow + `)
WHERE id = ? AND state = 'running'`

// queryJobCancelRequested lists the running jobs of owner (?1, ?2) whose
// cancellation was asked for, through the small index on cancel_owner: the
// owner's first 255 characters while such a request is pending, NULL
// otherwise. The whole owner is compared as bytes on the few rows found
// (utf8mb4_bin ignores trailing spaces).
const queryJobCancelRequested = `SELECT id, lease_token FROM leasehold_job
WHERE cancel_owner = LEFT(?, 255) AND CAST(lease_owner AS BINARY) = CAST(? AS BINARY)
	AND state = 'running' AND cancel_requested_at IS NOT NULL
ORDER BY id`
