-- Leasehold schema, version 1: the job table (the hot queue) and the
-- append-only attempt history. Times are DATETIME(6) in UTC, written from
-- UTC_TIMESTAMP(6) on the database clock. Text compares byte for byte
-- (utf8mb4_bin), as on the other backends: queue "Mail" is not queue "mail".

CREATE TABLE leasehold_job (
    id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    kind          VARCHAR(128) NOT NULL CHECK (CHAR_LENGTH(kind) BETWEEN 1 AND 128),
    queue         VARCHAR(128) NOT NULL CHECK (CHAR_LENGTH(queue) BETWEEN 1 AND 128),
    state         VARCHAR(16)  NOT NULL DEFAULT 'available' CHECK (state IN
                      ('available', 'scheduled', 'running', 'retryable',
                       'completed', 'discarded', 'cancelled', 'stuck')),
    priority      SMALLINT     NOT NULL DEFAULT 1 CHECK (priority BETWEEN 1 AND 4),
    -- JSON kept as the bytes the client encoded (MySQL's JSON type would
    -- reformat it); validity is still checked.
    args          LONGTEXT     NOT NULL CHECK (JSON_VALID(args)),
    metadata      LONGTEXT     NOT NULL CHECK (JSON_VALID(metadata)),
    -- Binary, so that keys compare byte for byte, trailing spaces included.
    unique_key    VARBINARY(512),
    attempt       INT          NOT NULL DEFAULT 0,
    max_attempts  INT          NOT NULL CHECK (max_attempts >= 1),
    errors        INT          NOT NULL DEFAULT 0,
    expiries      INT          NOT NULL DEFAULT 0,
    last_error    MEDIUMTEXT,
    -- The lease. lease_token is the fencing token: it grows with every grant.
    lease_token   BIGINT       NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    leased_at     DATETIME(6),
    lease_until   DATETIME(6),
    heartbeat_at  DATETIME(6),
    heartbeats    INT          NOT NULL DEFAULT 0,
    lease_ttl_ms  BIGINT       CHECK (lease_ttl_ms IS NULL OR lease_ttl_ms > 0),
    expiry_policy VARCHAR(8)   NOT NULL DEFAULT 'retry' CHECK (expiry_policy IN ('retry', 'stuck')),
    scheduled_at  DATETIME(6)  NOT NULL,
    created_at    DATETIME(6)  NOT NULL,
    finalized_at  DATETIME(6),
    -- MySQL and MariaDB have no partial indexes; these generated columns
    -- stand in for them. claim_queue is the queue while the job is claimable
    -- and NULL otherwise, so the claim index holds claimable jobs in claim
    -- order and the claim reads it without a sort.
    claim_queue   VARCHAR(128) AS (IF(state IN ('available', 'scheduled', 'retryable'), queue, NULL)) STORED,
    -- unique_key_active is the key while the job is unfinished and NULL
    -- otherwise; NULLs never collide in a unique index, so at most one
    -- unfinished job holds a key, under concurrent inserts too.
    unique_key_active VARBINARY(512) AS (IF(state IN ('available', 'scheduled', 'running', 'retryable', 'stuck'), unique_key, NULL)) STORED,
    -- lease_until, heartbeat_at and heartbeats are in no index: a heartbeat
    -- touches no index.
    KEY leasehold_job_claim_idx (claim_queue, priority, scheduled_at, id),
    UNIQUE KEY leasehold_job_unique_key_idx (unique_key_active),
    KEY leasehold_job_state_queue_idx (state, queue),
    KEY leasehold_job_kind_idx (kind)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per lease, appended when the lease ends, in the same transaction
-- as the job's state change.
CREATE TABLE leasehold_attempt (
    job_id            BIGINT      NOT NULL,
    attempt           INT         NOT NULL,
    token             BIGINT      NOT NULL,
    owner             TEXT        NOT NULL,
    leased_at         DATETIME(6) NOT NULL,
    lease_until       DATETIME(6) NOT NULL,
    last_heartbeat_at DATETIME(6),
    heartbeats        INT         NOT NULL DEFAULT 0,
    finished_at       DATETIME(6) NOT NULL,
    outcome           VARCHAR(16) NOT NULL CHECK (outcome IN
                          ('completed', 'failed', 'panicked', 'lease_expired',
                           'released', 'cancelled', 'snoozed')),
    error             MEDIUMTEXT,
    PRIMARY KEY (job_id, token),
    KEY leasehold_attempt_finished_idx (finished_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
