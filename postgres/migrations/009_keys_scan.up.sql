-- leasehold:compatible-with 8
-- Leasehold schema, version 9: a keyed claim that reads what it claims,
-- not the queue's backlog.
--
-- The keyed claim (per-key limits, rate limits, fairness) walks the keys
-- of a queue's claimable jobs in key order with this index, one index
-- probe per key (a skip scan), and reads each visited key's first jobs in
-- claim order from it; jobs without a key are one more group, the index's
-- NULL entries, read in claim order too. Every claimable job has an entry,
-- as in leasehold_job_claim_idx: one more index entry per insert and
-- retry; a claim, a heartbeat and a completion write none (their states
-- are not in the predicate).
--
-- key_cursor: the last key a keyed claim of the queue (on a kind's row:
-- a claim of that kind alone) visited; the next claim starts after it, so
-- the walk goes round the keys across claims.
-- Binaries that know version 8 neither read nor write either, hence the
-- declaration above.
--
-- CREATE INDEX blocks writes to the table while it builds. On a large
-- table, build it beforehand with CREATE INDEX CONCURRENTLY under the name
-- and definition below, and the migration skips building it.
CREATE INDEX IF NOT EXISTS leasehold_job_key_claim_idx ON leasehold_job (queue, flow_key, priority, scheduled_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');

ALTER TABLE leasehold_limit ADD COLUMN IF NOT EXISTS key_cursor text;
