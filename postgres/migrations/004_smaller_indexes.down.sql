DROP INDEX IF EXISTS leasehold_job_running_idx;
CREATE INDEX leasehold_job_running_idx ON leasehold_job (id) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS leasehold_job_running_queue_idx ON leasehold_job (queue) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS leasehold_job_running_kind_idx ON leasehold_job (kind) WHERE state = 'running';
DROP INDEX IF EXISTS leasehold_job_finalized_idx;
CREATE INDEX leasehold_job_finalized_idx ON leasehold_job (finalized_at)
    WHERE state IN ('completed', 'discarded', 'cancelled');
DROP INDEX IF EXISTS leasehold_job_state_idx;
CREATE INDEX IF NOT EXISTS leasehold_job_state_queue_idx ON leasehold_job (state, queue);
CREATE INDEX IF NOT EXISTS leasehold_job_kind_idx ON leasehold_job (kind);
