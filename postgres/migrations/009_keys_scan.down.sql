ALTER TABLE leasehold_limit DROP COLUMN IF EXISTS key_cursor;
DROP INDEX IF EXISTS leasehold_job_key_claim_idx;
