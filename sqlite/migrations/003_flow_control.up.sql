-- Leasehold schema, version 3: flow control and scheduling. Times are INTEGER
-- microseconds since the Unix epoch (UTC), as in version 1.
--
-- cancel_requested_at: an operator asked to cancel the running job; its
-- holder's handler is cancelled and the job never runs again.
-- unique_finished: the finished states in which a job keeps holding its
-- unique key (bitmask: 1 completed, 2 discarded, 4 cancelled).
ALTER TABLE leasehold_job ADD COLUMN cancel_requested_at INTEGER;
ALTER TABLE leasehold_job ADD COLUMN unique_finished INTEGER NOT NULL DEFAULT 0
    CHECK (unique_finished BETWEEN 0 AND 7);

-- The key is held by every unfinished job, and by a finished one whose
-- unique_finished names its state. Queries that look up the holder of a key
-- repeat this predicate verbatim (heldKeyPredicate), so the planner proves
-- they imply it and uses the index.
DROP INDEX leasehold_job_unique_key_idx;
CREATE UNIQUE INDEX leasehold_job_unique_key_idx ON leasehold_job (unique_key)
    WHERE unique_key IS NOT NULL
      AND (state IN ('available', 'scheduled', 'running', 'retryable', 'stuck')
           OR (state = 'completed' AND unique_finished & 1 <> 0)
           OR (state = 'discarded' AND unique_finished & 2 <> 0)
           OR (state = 'cancelled' AND unique_finished & 4 <> 0));

-- Global concurrency limits count running jobs per queue and per kind.
-- Per queue, leasehold_job_state_queue_idx (state, queue) of version 1
-- already serves the count; Postgres adds a partial index so that its
-- heartbeats stay HOT updates, which SQLite has no use for, and every index
-- here is written by each claim and finish.
CREATE INDEX leasehold_job_running_kind_idx ON leasehold_job (kind) WHERE state = 'running';
-- Clients poll for cancellations of the jobs they hold: a tiny index.
CREATE INDEX leasehold_job_cancel_idx ON leasehold_job (lease_owner)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
-- Retention deletes finished jobs oldest first.
CREATE INDEX leasehold_job_finalized_idx ON leasehold_job (finalized_at)
    WHERE state IN ('completed', 'discarded', 'cancelled');

-- A rate window per limited queue or kind. SQLite's single writer already
-- serialises the claims of a limited queue; the row holds the window.
CREATE TABLE leasehold_limit (
    scope        TEXT    NOT NULL CHECK (scope IN ('queue', 'kind')),
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    window_start INTEGER,
    window_count INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (scope, name)
);

-- Leader leases: one row per role, held by one client at a time. token is
-- the fencing token; it grows with every new holder.
CREATE TABLE leasehold_leader (
    name        TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    owner       TEXT    NOT NULL,
    token       INTEGER NOT NULL,
    lease_until INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- Periodic schedules: the next slot is stored, so a restart never skips
-- one and the advance is a compare-and-set fenced by the leader's token.
-- next_run_at is compared for equality with a value read back: as INTEGER
-- microseconds it round-trips exactly.
CREATE TABLE leasehold_periodic (
    name        TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    spec        TEXT    NOT NULL,
    next_run_at INTEGER NOT NULL,
    last_run_at INTEGER,
    last_job_id INTEGER,
    updated_at  INTEGER NOT NULL
);
