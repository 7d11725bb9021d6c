-- leasehold:compatible-with 5
-- Leasehold schema, version 7: per-key flow control. Times are INTEGER
-- microseconds since the Unix epoch (UTC), as in version 1.
--
-- flow_key: the job's key (InsertOpts.Key, WorkerOpts.KeyBy): per-key
-- concurrency limits, rate limits and fairness count and order by it.
-- sequence_key: the job's sequence (InsertOpts.Sequence,
-- WorkerOpts.SequenceBy): jobs with the same one run one after another in ID
-- order. Both are NULL for a job without one. Binaries that know the
-- version above never write them: their jobs have no key.
ALTER TABLE leasehold_job ADD COLUMN flow_key TEXT CHECK (length(flow_key) BETWEEN 1 AND 256);
ALTER TABLE leasehold_job ADD COLUMN sequence_key TEXT CHECK (length(sequence_key) BETWEEN 1 AND 256);

-- Listings filter by key; a keyed claim counts the running jobs per key.
CREATE INDEX leasehold_job_flow_key_idx ON leasehold_job (flow_key, state)
    WHERE flow_key IS NOT NULL;
-- A sequenced job's claim looks for an unfinished job before it.
CREATE INDEX leasehold_job_sequence_idx ON leasehold_job (sequence_key, id)
    WHERE sequence_key IS NOT NULL;

-- Per-key rate windows: the starts of one key in the current fixed window
-- of a queue's KeyRateLimit. The pruner deletes the rows whose window
-- ended, so the table holds at most one row per key that started a job in
-- the last window.
CREATE TABLE leasehold_key_window (
    scope        TEXT    NOT NULL CHECK (scope IN ('queue', 'kind')),
    name         TEXT    NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    flow_key     TEXT    NOT NULL CHECK (length(flow_key) BETWEEN 1 AND 256),
    window_start INTEGER NOT NULL,
    window_end   INTEGER NOT NULL,
    window_count INTEGER NOT NULL,
    PRIMARY KEY (scope, name, flow_key)
);
CREATE INDEX leasehold_key_window_end_idx ON leasehold_key_window (window_end);
