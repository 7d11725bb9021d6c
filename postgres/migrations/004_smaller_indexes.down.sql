DROP INDEX IF EXISTS leasehold_job_finalized_idx;
CREATE INDEX leasehold_job_finalized_idx ON leasehold_job (finalized_at)
    WHERE state IN ('completed', 'discarded', 'cancelled');
DROP INDEX IF EXISTS leasehold_job_state_idx;
CREATE INDEX IF NOT EXISTS leasehold_job_state_queue_idx ON leasehold_job (state, queue);
CREATE INDEX IF NOT EXISTS leasehold_job_kind_idx ON leasehold_job (kind);
