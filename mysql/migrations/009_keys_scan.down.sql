ALTER TABLE leasehold_limit DROP COLUMN key_cursor;
ALTER TABLE leasehold_job DROP KEY leasehold_job_key_claim_idx;
