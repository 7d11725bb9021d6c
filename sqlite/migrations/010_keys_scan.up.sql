-- leasehold:compatible-with 9
-- Leasehold schema, version 10: a keyed claim that reads what it claims,
-- not the queue's backlog.
--
-- The keyed claim (per-key limits, rate limits, fairness) walks the keys
-- of a queue's claimable jobs in key order with this index, one index
-- probe per key (a skip scan), and reads each visited key's first jobs in
-- claim order from it; jobs without a key are one more group, the index's
-- NULL entries, read in claim order too. Every claimable job has an entry,
-- as in leasehold_job_claim_idx: one more index entry per insert and
-- retry, removed when the job is claimed, all under the write lock.
--
-- key_cursor: the last key a keyed claim of the queue (on a kind's row:
-- a claim of that kind alone) visited; the next claim starts after it, so
-- the walk goes round the keys across claims.
-- Binaries that know version 9 neither read nor write either, hence the
-- declaration above.
CREATE INDEX leasehold_job_key_claim_idx ON leasehold_job (queue, flow_key, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

ALTER TABLE leasehold_limit ADD COLUMN key_cursor TEXT;
