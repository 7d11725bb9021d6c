DROP TABLE IF EXISTS leasehold_job_dep;
DROP TABLE IF EXISTS leasehold_stage;
-- Pending jobs cannot be kept in version 7's states: they become available.
UPDATE leasehold_job SET state = 'available' WHERE state = 'pending';
ALTER TABLE leasehold_job
    DROP CONSTRAINT leasehold_job_state_check,
    DROP CONSTRAINT leasehold_job_stage_check,
    DROP CONSTRAINT leasehold_job_stage_state_check,
    DROP CONSTRAINT leasehold_job_dependency_policy_check;
ALTER TABLE leasehold_job
    DROP COLUMN stage,
    DROP COLUMN stage_state,
    DROP COLUMN deps_pending,
    DROP COLUMN has_dependents,
    DROP COLUMN dependency_policy,
    DROP COLUMN cancelled_by_dep;
ALTER TABLE leasehold_job
    ADD CONSTRAINT leasehold_job_state_check CHECK (state IN
        ('available', 'scheduled', 'running', 'retryable',
         'completed', 'discarded', 'cancelled', 'stuck'));
