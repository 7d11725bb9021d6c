-- Leasehold schema, version 11: one claim index entry per job without a
-- key, not two.
--
-- Version 10's keyed claim index held every claimable job, keyed or not,
-- beside the claim index: each insert, retry and claim of any job wrote
-- an entry into both, under the write lock that every writer of the
-- database waits for. Now:
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
-- Binaries that know version 10 name these indexes in INDEXED BY with
-- queries the new definitions do not serve, so this migration declares
-- no compatibility: stop them before migrating.
DROP INDEX leasehold_job_claim_idx;
CREATE INDEX leasehold_job_claim_idx ON leasehold_job (queue, (flow_key IS NOT NULL), priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

DROP INDEX leasehold_job_key_claim_idx;
CREATE INDEX leasehold_job_key_claim_idx ON leasehold_job (queue, flow_key, priority, scheduled_at, id)
    WHERE flow_key IS NOT NULL AND state IN ('available', 'scheduled', 'retryable');
