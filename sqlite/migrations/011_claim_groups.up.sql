-- Leasehold schema, version 11: fewer index entries per job on the success
-- path, all written under the write lock that every writer of the database
-- waits for.
--
-- Version 10's keyed claim index held every claimable job, keyed or not,
-- beside the claim index: each insert, retry and claim of any job wrote
-- an entry into both. Now:
--   leasehold_job_claim_idx      every claimable job, in two groups per
--                                queue, those without a key (0) and
--                                those with one (1), each in claim order
--   leasehold_job_key_claim_idx  the claimable jobs with a key, by key
-- The plain claim merges the queue's two groups in claim order (a merge
-- of two ordered index ranges, no sort), reading no more entries than it
-- did. The keyed claim walks the keys in leasehold_job_key_claim_idx and
-- reads the group without a key from leasehold_job_claim_idx, so neither
-- reads the jobs of the other group. A job without a key now has one
-- claim index entry; a job with a key has two, as before.
--
-- leasehold_job_running_idx (id) held the running jobs, which
-- leasehold_job_state_queue_idx (state, queue) holds too, in (queue, id)
-- order under state 'running': the readers (the expiry sweep and check,
-- the running counts per queue) read that range instead. A claim and a
-- completion each wrote an entry into both.
--
-- leasehold_attempt is rebuilt WITHOUT ROWID, clustered on its primary
-- key (job_id, token): an attempt row was a row of the table and an entry
-- of the key's index, now it is one entry (a job's attempts are read by
-- that key). The rebuild copies the history under the write lock: about
-- 5 s for a million attempt rows and a million jobs (BenchmarkMigration11).
--
-- Binaries that know version 10 name these indexes in INDEXED BY with
-- queries the new definitions do not serve, so this migration declares
-- no compatibility: stop them before migrating.
DROP INDEX leasehold_job_claim_idx;
CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue, (flow_key IS NOT NULL), priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

DROP INDEX leasehold_job_key_claim_idx;
CREATE INDEX leasehold_job_key_claim_idx ON leasehold_job (queue, flow_key, priority, scheduled_at, id)
    WHERE flow_key IS NOT NULL AND state IN ('available', 'scheduled', 'retryable');

DROP INDEX leasehold_job_running_idx;

-- Version 1's definition, clustered on the key.
CREATE TABLE leasehold_attempt_v11 (
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
) WITHOUT ROWID;
INSERT INTO leasehold_attempt_v11
    (job_id, attempt, token, owner, leased_at, lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT job_id, attempt, token, owner, leased_at, lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error
FROM leasehold_attempt;
DROP TABLE leasehold_attempt;
ALTER TABLE leasehold_attempt_v11 RENAME TO leasehold_attempt;
CREATE INDEX leasehold_attempt_finished_idx ON leasehold_attempt (finished_at);
