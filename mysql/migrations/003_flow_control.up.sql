-- Leasehold schema, version 3: flow control and scheduling.
--
-- cancel_requested_at: an operator asked to cancel the running job; its
-- holder's handler is cancelled and the job never runs again.
-- unique_finished: the finished states in which a job keeps holding its
-- unique key (bitmask: 1 completed, 2 discarded, 4 cancelled).
-- Two statements: adding plain columns at the end is an instant change on
-- both servers; the constraint and the generated columns below need one
-- table copy. The CHECK is named so that the down migration can drop it:
-- MySQL refuses to drop a column a CHECK constraint uses.
ALTER TABLE leasehold_job
    ADD COLUMN cancel_requested_at DATETIME(6),
    ADD COLUMN unique_finished SMALLINT NOT NULL DEFAULT 0;

-- MySQL and MariaDB have no partial indexes: as in version 1, generated
-- columns hold the indexed value while the row belongs in the index and
-- NULL otherwise.
ALTER TABLE leasehold_job
    ADD CONSTRAINT leasehold_job_unique_finished_check CHECK (unique_finished BETWEEN 0 AND 7),
    -- The key is held by every unfinished job, and by a finished one whose
    -- unique_finished names its state.
    MODIFY COLUMN unique_key_active VARBINARY(512) AS (CASE
        WHEN state IN ('available', 'scheduled', 'running', 'retryable', 'stuck') THEN unique_key
        WHEN state = 'completed' AND unique_finished & 1 <> 0 THEN unique_key
        WHEN state = 'discarded' AND unique_finished & 2 <> 0 THEN unique_key
        WHEN state = 'cancelled' AND unique_finished & 4 <> 0 THEN unique_key
        END) STORED,
    -- Global concurrency limits count running jobs per queue and per kind.
    -- Heartbeats touch none of the columns these depend on, so a heartbeat
    -- still touches no index.
    ADD COLUMN running_queue VARCHAR(128) AS (IF(state = 'running', queue, NULL)) STORED,
    ADD COLUMN running_kind VARCHAR(128) AS (IF(state = 'running', kind, NULL)) STORED,
    -- Clients poll for cancellations of the jobs they hold: a tiny index.
    -- lease_owner is TEXT, which takes no full index; the first 255
    -- characters narrow the search, the query compares the whole owner.
    ADD COLUMN cancel_owner VARCHAR(255) AS
        (IF(state = 'running' AND cancel_requested_at IS NOT NULL, LEFT(lease_owner, 255), NULL)) STORED,
    -- Retention deletes finished jobs oldest first.
    ADD COLUMN final_at DATETIME(6) AS
        (IF(state IN ('completed', 'discarded', 'cancelled'), finalized_at, NULL)) STORED,
    ADD KEY leasehold_job_running_queue_idx (running_queue),
    ADD KEY leasehold_job_running_kind_idx (running_kind),
    ADD KEY leasehold_job_cancel_idx (cancel_owner),
    ADD KEY leasehold_job_finalized_idx (final_at);

-- A lock and a rate window per limited queue or kind. The claim of a
-- limited queue locks its rows, counts, claims and commits.
CREATE TABLE leasehold_limit (
    scope        VARCHAR(8)   NOT NULL CHECK (scope IN ('queue', 'kind')),
    name         VARCHAR(128) NOT NULL CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 128),
    window_start DATETIME(6),
    window_count BIGINT       NOT NULL DEFAULT 0,
    updated_at   DATETIME(6)  NOT NULL,
    PRIMARY KEY (scope, name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Leader leases: one row per role, held by one client at a time. token is
-- the fencing token; it grows with every new holder.
CREATE TABLE leasehold_leader (
    name        VARCHAR(128) NOT NULL PRIMARY KEY CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 128),
    owner       TEXT         NOT NULL,
    token       BIGINT       NOT NULL,
    lease_until DATETIME(6)  NOT NULL,
    acquired_at DATETIME(6)  NOT NULL,
    updated_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Periodic schedules: the next slot is stored, so a restart never skips
-- one and the advance is a compare-and-set fenced by the leader's token.
CREATE TABLE leasehold_periodic (
    name        VARCHAR(128) NOT NULL PRIMARY KEY CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 128),
    spec        TEXT         NOT NULL,
    next_run_at DATETIME(6)  NOT NULL,
    last_run_at DATETIME(6),
    last_job_id BIGINT,
    updated_at  DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
