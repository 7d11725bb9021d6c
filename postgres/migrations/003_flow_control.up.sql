-- Leasehold schema, version 3: flow control and scheduling.
--
-- cancel_requested_at: an operator asked to cancel the running job; its
-- holder's handler is cancelled and the job never runs again.
-- unique_finished: the finished states in which a job keeps holding its
-- unique key (bitmask: 1 completed, 2 discarded, 4 cancelled).
ALTER TABLE leasehold_job
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN unique_finished smallint NOT NULL DEFAULT 0 CHECK (unique_finished BETWEEN 0 AND 7);

-- The key is held by every unfinished job, and by a finished one whose
-- unique_finished names its state.
DROP INDEX leasehold_job_unique_key_idx;
CREATE UNIQUE INDEX leasehold_job_unique_key_idx ON leasehold_job (unique_key)
    WHERE unique_key IS NOT NULL
      AND (state IN ('available', 'scheduled', 'running', 'retryable', 'stuck')
           OR (state = 'completed' AND unique_finished & 1 <> 0)
           OR (state = 'discarded' AND unique_finished & 2 <> 0)
           OR (state = 'cancelled' AND unique_finished & 4 <> 0));

-- Global concurrency limits count running jobs per queue and per kind.
-- Heartbeats touch none of these columns, so they stay HOT updates.
CREATE INDEX IF NOT EXISTS leasehold_job_running_queue_idx ON leasehold_job (queue) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS leasehold_job_running_kind_idx ON leasehold_job (kind) WHERE state = 'running';
-- Clients poll for cancellations of the jobs they hold: a tiny index.
CREATE INDEX IF NOT EXISTS leasehold_job_cancel_idx ON leasehold_job (lease_owner)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
-- Retention deletes finished jobs oldest first.
CREATE INDEX IF NOT EXISTS leasehold_job_finalized_idx ON leasehold_job (finalized_at)
    WHERE state IN ('completed', 'discarded', 'cancelled');

-- A lock and a rate window per limited queue or kind. The claim of a
-- limited queue locks its rows, counts, claims and commits.
CREATE TABLE leasehold_limit (
    scope        text        NOT NULL CHECK (scope IN ('queue', 'kind')),
    name         text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 128),
    window_start timestamptz,
    window_count bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, name)
);

-- Leader leases: one row per role, held by one client at a time. token is
-- the fencing token; it grows with every new holder.
CREATE TABLE leasehold_leader (
    name        text        PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 128),
    owner       text        NOT NULL,
    token       bigint      NOT NULL,
    lease_until timestamptz NOT NULL,
    acquired_at timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Periodic schedules: the next slot is stored, so a restart never skips
-- one and the advance is a compare-and-set fenced by the leader's token.
CREATE TABLE leasehold_periodic (
    name        text        PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 128),
    spec        text        NOT NULL,
    next_run_at timestamptz NOT NULL,
    last_run_at timestamptz,
    last_job_id bigint,
    updated_at  timestamptz NOT NULL DEFAULT now()
);
