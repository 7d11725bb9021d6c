DROP TABLE IF EXISTS leasehold_key_window;
DROP INDEX IF EXISTS leasehold_job_sequence_idx;
DROP INDEX IF EXISTS leasehold_job_flow_key_idx;
ALTER TABLE leasehold_job DROP COLUMN IF EXISTS sequence_key, DROP COLUMN IF EXISTS flow_key;
