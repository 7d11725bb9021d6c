CREATE INDEX leasehold_job_running_idx ON leasehold_job (id) WHERE state = 'running';

DROP INDEX leasehold_job_key_claim_idx;
CREATE INDEX leasehold_job_key_claim_idx ON leasehold_job (queue, flow_key, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

DROP INDEX leasehold_job_claim_idx;
CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
