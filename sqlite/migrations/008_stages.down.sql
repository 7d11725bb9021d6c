-- Pending jobs cannot be kept in version 7's states: they become available.
UPDATE leasehold_job SET state = 'available' WHERE state = 'pending';
-- The statements after the edit change the schema cookie (see the up file).
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '(''pending'', ''available'', ''scheduled'', ''running'', ''retryable'',',
                       '(''available'', ''scheduled'', ''running'', ''retryable'',')
WHERE type = 'table' AND name = 'leasehold_job';
PRAGMA writable_schema = RESET;
DROP TRIGGER IF EXISTS leasehold_job_dep_retried;
DROP TRIGGER IF EXISTS leasehold_job_dep_failed;
DROP TRIGGER IF EXISTS leasehold_job_dep_completed;
DROP TABLE IF EXISTS leasehold_job_dep;
DROP TABLE IF EXISTS leasehold_stage;
ALTER TABLE leasehold_job DROP COLUMN cancelled_by_dep;
ALTER TABLE leasehold_job DROP COLUMN dependency_policy;
ALTER TABLE leasehold_job DROP COLUMN has_dependents;
ALTER TABLE leasehold_job DROP COLUMN deps_pending;
ALTER TABLE leasehold_job DROP COLUMN stage_state;
ALTER TABLE leasehold_job DROP COLUMN stage;
