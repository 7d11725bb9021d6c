-- Leasehold schema, version 1: the job table (the hot queue) and the
-- append-only attempt history.

CREATE TABLE leasehold_job (
    id            bigserial PRIMARY KEY,
    kind          text        NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 128),
    queue         text        NOT NULL CHECK (char_length(queue) BETWEEN 1 AND 128),
    state         text        NOT NULL DEFAULT 'available' CHECK (state IN
                      ('available', 'scheduled', 'running', 'retryable',
                       'completed', 'discarded', 'cancelled', 'stuck')),
    priority      smallint    NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 4),
    args          jsonb       NOT NULL,
    metadata      jsonb       NOT NULL DEFAULT '{}',
    unique_key    text,
    attempt       integer     NOT NULL DEFAULT 0,
    max_attempts  integer     NOT NULL CHECK (max_attempts >= 1),
    errors        integer     NOT NULL DEFAULT 0,
    expiries      integer     NOT NULL DEFAULT 0,
    last_error    text,
    -- The lease. lease_token is the fencing token: it grows with every grant.
    lease_token   bigint      NOT NULL DEFAULT 0,
    lease_owner   text,
    leased_at     timestamptz,
    lease_until   timestamptz,
    heartbeat_at  timestamptz,
    heartbeats    integer     NOT NULL DEFAULT 0,
    lease_ttl_ms  bigint      CHECK (lease_ttl_ms IS NULL OR lease_ttl_ms > 0),
    expiry_policy text        NOT NULL DEFAULT 'retry' CHECK (expiry_policy IN ('retry', 'stuck')),
    scheduled_at  timestamptz NOT NULL DEFAULT now(),
    created_at    timestamptz NOT NULL DEFAULT now(),
    finalized_at  timestamptz
) WITH (
    -- Heartbeats update lease_until, heartbeat_at and heartbeats, none of
    -- which is indexed; free space on each page lets Postgres apply them as
    -- HOT updates. The table churns: vacuum it early.
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.05
);

-- The claim scans this index in claim order; it holds only claimable rows.
CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

-- The stuck watcher scans running jobs only. lease_until is deliberately not
-- in the index, so that heartbeats stay HOT updates.
CREATE INDEX leasehold_job_running_idx ON leasehold_job (id) WHERE state = 'running';

-- Idempotency keys: at most one unfinished job per key.
CREATE UNIQUE INDEX leasehold_job_unique_key_idx ON leasehold_job (unique_key)
    WHERE unique_key IS NOT NULL
      AND state IN ('available', 'scheduled', 'running', 'retryable', 'stuck');

CREATE INDEX leasehold_job_state_queue_idx ON leasehold_job (state, queue);
CREATE INDEX leasehold_job_kind_idx ON leasehold_job (kind);

-- One row per lease, appended when the lease ends, in the same statement as
-- the job's state change.
CREATE TABLE leasehold_attempt (
    job_id            bigint      NOT NULL,
    attempt           integer     NOT NULL,
    token             bigint      NOT NULL,
    owner             text        NOT NULL,
    leased_at         timestamptz NOT NULL,
    lease_until       timestamptz NOT NULL,
    last_heartbeat_at timestamptz,
    heartbeats        integer     NOT NULL DEFAULT 0,
    finished_at       timestamptz NOT NULL DEFAULT now(),
    outcome           text        NOT NULL CHECK (outcome IN
                          ('completed', 'failed', 'panicked', 'lease_expired',
                           'released', 'cancelled', 'snoozed')),
    error             text,
    PRIMARY KEY (job_id, token)
);

CREATE INDEX leasehold_attempt_finished_idx ON leasehold_attempt (finished_at);
