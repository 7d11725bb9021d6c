CREATE TABLE leasehold_attempt_v10 (
    job_id            INTEGER NOT NULL,
    attempt           INTEGER NOT NULL,
    token             INTEGER NOT NULL,
    owner             TEXT    NOT NULL,
    leased_at         INTEGER NOT NULL,
    lease_until       INTEGER NOT NULL,
    last_heartbeat_at INTEGER,
    heartbeats        INTEGER NOT NULL DEFAULT 0,
    finished_at       INTEGER NOT NULL,
    outcome           TEXT    NOT NULL CHECK (outcome IN
                          ('completed', 'failed', 'panicked', 'lease_expired',
                           'released', 'cancelled', 'snoozed')),
    error             TEXT,
    PRIMARY KEY (job_id, token)
);
INSERT INTO leasehold_attempt_v10
    (job_id, attempt, token, owner, leased_at, lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT job_id, attempt, token, owner, leased_at, lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error
FROM leasehold_attempt;
DROP TABLE leasehold_attempt;
ALTER TABLE leasehold_attempt_v10 RENAME TO leasehold_attempt;
CREATE INDEX leasehold_attempt_finished_idx ON leasehold_attempt (finished_at);

CREATE INDEX leasehold_job_running_idx ON leasehold_job (id) WHERE state = 'running';

DROP INDEX leasehold_job_key_claim_idx;
CREATE INDEX leasehold_job_key_claim_idx ON leasehold_job (queue, flow_key, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

DROP INDEX leasehold_job_claim_idx;
CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
