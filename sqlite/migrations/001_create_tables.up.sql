-- Leasehold schema, version 1: the job table (the hot queue) and the
-- append-only attempt history. Times are INTEGER microseconds since the Unix
-- epoch (UTC); read them with datetime(col / 1000000.0, 'unixepoch', 'subsec').

CREATE TABLE leasehold_job (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    kind          TEXT    NOT NULL CHECK (length(kind) BETWEEN 1 AND 128),
    queue         TEXT    NOT NULL CHECK (length(queue) BETWEEN 1 AND 128),
    state         TEXT    NOT NULL DEFAULT 'available' CHECK (state IN
                      ('available', 'scheduled', 'running', 'retryable',
                       'completed', 'discarded', 'cancelled', 'stuck')),
    priority      INTEGER NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 4),
    args          TEXT    NOT NULL,
    metadata      TEXT    NOT NULL DEFAULT '{}',
    unique_key    TEXT,
    attempt       INTEGER NOT NULL DEFAULT 0,
    max_attempts  INTEGER NOT NULL CHECK (max_attempts >= 1),
    errors        INTEGER NOT NULL DEFAULT 0,
    expiries      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    -- The lease. lease_token is the fencing token: it grows with every grant.
    lease_token   INTEGER NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    leased_at     INTEGER,
    lease_until   INTEGER,
    heartbeat_at  INTEGER,
    heartbeats    INTEGER NOT NULL DEFAULT 0,
    lease_ttl_ms  INTEGER CHECK (lease_ttl_ms IS NULL OR lease_ttl_ms > 0),
    expiry_policy TEXT    NOT NULL DEFAULT 'retry' CHECK (expiry_policy IN ('retry', 'stuck')),
    scheduled_at  INTEGER NOT NULL,
    created_at    INTEGER NOT NULL,
    finalized_at  INTEGER
);

CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

CREATE INDEX leasehold_job_running_idx ON leasehold_job (id) WHERE state = 'running';

CREATE UNIQUE INDEX leasehold_job_unique_key_idx ON leasehold_job (unique_key)
    WHERE unique_key IS NOT NULL
      AND state IN ('available', 'scheduled', 'running', 'retryable', 'stuck');

CREATE INDEX leasehold_job_state_queue_idx ON leasehold_job (state, queue);
CREATE INDEX leasehold_job_kind_idx ON leasehold_job (kind);

CREATE TABLE leasehold_attempt (
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

CREATE INDEX leasehold_attempt_finished_idx ON leasehold_attempt (finished_at);
