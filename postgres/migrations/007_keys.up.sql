-- leasehold:compatible-with 6
-- Leasehold schema, version 7: per-key flow control.
--
-- flow_key: the job's key (InsertOpts.Key, WorkerOpts.KeyBy): per-key
-- concurrency limits, rate limits and fairness count and order by it.
-- sequence_key: the job's sequence (InsertOpts.Sequence,
-- WorkerOpts.SequenceBy): jobs with the same one run one after another in ID
-- order. Both are NULL for a job without one. Binaries that know version 6
-- never write them, hence the declaration above: their jobs have no key.
ALTER TABLE leasehold_job
    ADD COLUMN flow_key text CHECK (char_length(flow_key) BETWEEN 1 AND 256),
    ADD COLUMN sequence_key text CHECK (char_length(sequence_key) BETWEEN 1 AND 256);

-- Listings filter by key; a keyed claim counts the running jobs per key.
-- Heartbeats touch neither column, so they stay HOT updates.
CREATE INDEX IF NOT EXISTS leasehold_job_flow_key_idx ON leasehold_job (flow_key, state)
    WHERE flow_key IS NOT NULL;
-- A sequenced job's claim looks for an unfinished job before it.
CREATE INDEX IF NOT EXISTS leasehold_job_sequence_idx ON leasehold_job (sequence_key, id)
    WHERE sequence_key IS NOT NULL;

-- Per-key rate windows: the starts of one key in the current fixed window
-- of a queue's KeyRateLimit. A row whose window ended is dead weight; the
-- pruner deletes it, so the table holds at most one row per key that
-- started a job in the last window.
CREATE TABLE leasehold_key_window (
    scope        text        NOT NULL CHECK (scope IN ('queue', 'kind')),
    name         text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 128),
    flow_key     text        NOT NULL CHECK (char_length(flow_key) BETWEEN 1 AND 256),
    window_start timestamptz NOT NULL,
    window_end   timestamptz NOT NULL,
    window_count bigint      NOT NULL,
    PRIMARY KEY (scope, name, flow_key)
);
CREATE INDEX leasehold_key_window_end_idx ON leasehold_key_window (window_end);
