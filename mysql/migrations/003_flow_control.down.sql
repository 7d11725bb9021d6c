DROP TABLE IF EXISTS leasehold_periodic;
DROP TABLE IF EXISTS leasehold_leader;
DROP TABLE IF EXISTS leasehold_limit;
-- Dropping a column drops the index on it; the keys are named for clarity.
-- DROP CONSTRAINT is the syntax both servers share (MySQL from 8.0.19).
ALTER TABLE leasehold_job
    DROP KEY leasehold_job_finalized_idx,
    DROP KEY leasehold_job_cancel_idx,
    DROP KEY leasehold_job_running_kind_idx,
    DROP KEY leasehold_job_running_queue_idx,
    DROP COLUMN final_at,
    DROP COLUMN cancel_owner,
    DROP COLUMN running_kind,
    DROP COLUMN running_queue,
    MODIFY COLUMN unique_key_active VARBINARY(512) AS (IF(state IN ('available', 'scheduled', 'running', 'retryable', 'stuck'), unique_key, NULL)) STORED,
    DROP CONSTRAINT leasehold_job_unique_finished_check;
ALTER TABLE leasehold_job
    DROP COLUMN unique_finished,
    DROP COLUMN cancel_requested_at;
