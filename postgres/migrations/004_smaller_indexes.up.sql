-- Leasehold schema, version 4: no index entries on the success path that no
-- query needs.
--
-- A claim (available -> running) and a completion (running -> completed)
-- change state, which partial-index predicates name, so neither can be a HOT
-- update: each writes a new row version and an entry into every index whose
-- predicate the new version satisfies. The full indexes on (state, queue) and
-- (kind) took an entry on every insert, claim and completion, for listings
-- and counts that either scan few rows of those states or are served by the
-- partial indexes below and of migrations 1 and 3:
--   available, scheduled, retryable  leasehold_job_claim_idx (queue, ...)
--   running                          leasehold_job_running_idx
--   completed, discarded, cancelled  leasehold_job_finalized_idx
--   scheduled, retryable, stuck,     leasehold_job_state_idx (new)
--   discarded, cancelled
-- A listing by kind alone walks the primary key newest first. Likewise, a
-- claim wrote an entry into each of three running indexes (by id, by queue,
-- by kind); one index on (id, queue, kind) serves all their readers.
--
-- CREATE INDEX blocks writes to the table while it builds. On a large
-- table, build the new indexes beforehand with CREATE INDEX CONCURRENTLY,
-- under the names and definitions below (those replacing an index under a
-- temporary _v4 name), and the migration skips building them.
DROP INDEX IF EXISTS leasehold_job_state_queue_idx;
DROP INDEX IF EXISTS leasehold_job_kind_idx;

-- The states a job enters only off the success path (a future schedule, a
-- snooze, a failure, a cancellation, an operator): listings by state (and
-- queue) find them here in id order, and the counts per queue read it alone.
CREATE INDEX IF NOT EXISTS leasehold_job_state_idx ON leasehold_job (state, queue, id)
    WHERE state IN ('scheduled', 'retryable', 'discarded', 'cancelled', 'stuck');

-- The retention index carries queue and state, so that the counts of
-- finished jobs per queue and state read it alone (an index-only scan of
-- pages that vacuum marked all-visible) instead of the table. Same entries
-- as before, wider.
CREATE INDEX IF NOT EXISTS leasehold_job_finalized_v4_idx ON leasehold_job (finalized_at) INCLUDE (queue, state)
    WHERE state IN ('completed', 'discarded', 'cancelled');
DROP INDEX IF EXISTS leasehold_job_finalized_idx;
ALTER INDEX leasehold_job_finalized_v4_idx RENAME TO leasehold_job_finalized_idx;

-- The running jobs, in id order (the expiry watcher, listings, the
-- completion's lookup by id), with queue and kind so that the fleet-wide
-- limits count a queue's or a kind's running jobs from this index alone:
-- the scan reads only running entries and visits the table only for the
-- matching ones (their lease_until). It replaces the three indexes of
-- migrations 1 and 3 on running jobs.
CREATE INDEX IF NOT EXISTS leasehold_job_running_v4_idx ON leasehold_job (id, queue, kind)
    WHERE state = 'running';
DROP INDEX IF EXISTS leasehold_job_running_queue_idx;
DROP INDEX IF EXISTS leasehold_job_running_kind_idx;
DROP INDEX IF EXISTS leasehold_job_running_idx;
ALTER INDEX leasehold_job_running_v4_idx RENAME TO leasehold_job_running_idx;
