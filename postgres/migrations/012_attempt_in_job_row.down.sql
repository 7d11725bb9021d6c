-- The leases the job rows hold go into the log first: version 11 reads
-- the history from the table alone.
DROP TRIGGER IF EXISTS attempt_keep_update_trigger ON leasehold_job;
DROP TRIGGER IF EXISTS attempt_keep_delete_trigger ON leasehold_job;
INSERT INTO leasehold_attempt_log (job_id, attempt, token, owner, leased_at,
    lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, lease_owner, leased_at,
    lease_until, heartbeat_at, heartbeats, finalized_at, 'completed', NULL
FROM leasehold_job
WHERE completion_in_row
ON CONFLICT (job_id, token) DO NOTHING;
DROP VIEW leasehold_attempt;
DROP FUNCTION IF EXISTS leasehold_attempt_insert();
DROP FUNCTION IF EXISTS leasehold_attempt_keep_deleted();
DROP FUNCTION IF EXISTS leasehold_attempt_keep();
ALTER TABLE leasehold_job DROP COLUMN completion_in_row;
ALTER TABLE leasehold_attempt_log RENAME TO "leasehold_attempt";
