ALTER TABLE leasehold_limit DROP COLUMN key_cursor;
DROP INDEX IF EXISTS leasehold_job_key_claim_idx;
