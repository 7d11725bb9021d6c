CREATE INDEX IF NOT EXISTS leasehold_job_cancel_idx ON leasehold_job (lease_owner)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
DROP INDEX IF EXISTS leasehold_job_cancel_requested_idx;
