DROP TABLE IF EXISTS leasehold_periodic;
DROP TABLE IF EXISTS leasehold_leader;
DROP TABLE IF EXISTS leasehold_limit;
DROP INDEX IF EXISTS leasehold_job_finalized_idx;
DROP INDEX IF EXISTS leasehold_job_cancel_idx;
DROP INDEX IF EXISTS leasehold_job_running_kind_idx;
DROP INDEX IF EXISTS leasehold_job_unique_key_idx;
CREATE UNIQUE INDEX leasehold_job_unique_key_idx ON leasehold_job (unique_key)
    WHERE unique_key IS NOT NULL
      AND state IN ('available', 'scheduled', 'running', 'retryable', 'stuck');
-- SQLite drops a column only once no index refers to it.
ALTER TABLE leasehold_job DROP COLUMN unique_finished;
ALTER TABLE leasehold_job DROP COLUMN cancel_requested_at;
