DROP TABLE IF EXISTS leasehold_key_window;
DROP INDEX IF EXISTS leasehold_job_sequence_idx;
DROP INDEX IF EXISTS leasehold_job_flow_key_idx;
ALTER TABLE leasehold_job DROP COLUMN sequence_key;
ALTER TABLE leasehold_job DROP COLUMN flow_key;
