-- leasehold:compatible-with 8
-- Leasehold schema, version 9: a keyed claim that reads what it claims,
-- not the queue's backlog.
--
-- The keyed claim (per-key limits, rate limits, fairness) walks the keys
-- of a queue's claimable jobs in key order with this index, a few keys at
-- a time, and reads each visited key's first jobs in claim order from it;
-- jobs without a key are one more group, the index's NULL keys, read in
-- claim order too. claim_queue is NULL unless the job is claimable (version
-- 1), so the index holds the claimable jobs, as leasehold_job_claim_idx
-- does: one more index entry per insert and retry, removed when the job is
-- claimed; a heartbeat touches none of its columns. InnoDB adds a secondary
-- index in place, without blocking writes to the table.
--
-- key_cursor: the last key a keyed claim of the queue (on a kind's row:
-- a claim of that kind alone) visited; the next claim starts after it, so
-- the walk goes round the keys across claims. Binary, as flow_key.
-- Binaries that know version 8 neither read nor write either, hence the
-- declaration above.
ALTER TABLE leasehold_job
    ADD KEY leasehold_job_key_claim_idx (claim_queue, flow_key, priority, scheduled_at, id);

ALTER TABLE leasehold_limit ADD COLUMN key_cursor VARBINARY(256);
