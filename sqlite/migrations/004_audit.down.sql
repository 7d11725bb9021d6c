DROP INDEX IF EXISTS leasehold_audit_at_idx;
DROP INDEX IF EXISTS leasehold_audit_job_idx;
DROP TABLE IF EXISTS leasehold_audit;
