DROP TABLE IF EXISTS leasehold_key_window;
-- Dropping a column drops the index on it; the keys are named for clarity.
ALTER TABLE leasehold_job
    DROP KEY leasehold_job_sequence_idx,
    DROP KEY leasehold_job_flow_key_idx,
    DROP KEY leasehold_job_running_flow_key_idx,
    DROP COLUMN running_flow_key;
ALTER TABLE leasehold_job
    DROP COLUMN sequence_key,
    DROP COLUMN flow_key;
