-- leasehold:compatible-with 5
-- Leasehold schema, version 7: per-key flow control.
--
-- flow_key: the job's key (InsertOpts.Key, WorkerOpts.KeyBy): per-key
-- concurrency limits, rate limits and fairness count and order by it.
-- sequence_key: the job's sequence (InsertOpts.Sequence,
-- WorkerOpts.SequenceBy): jobs with the same one run one after another in ID
-- order. Both are NULL for a job without one, and compared byte for byte
-- (VARBINARY, as unique_key). Binaries that know the version above never
-- write them: their jobs have no key.
ALTER TABLE leasehold_job
    ADD COLUMN flow_key VARBINARY(256),
    ADD COLUMN sequence_key VARBINARY(256);

-- No partial indexes: running_flow_key holds the key while the job runs,
-- for the per-key running counts of a keyed claim. Heartbeats touch none
-- of the columns it depends on.
ALTER TABLE leasehold_job
    ADD COLUMN running_flow_key VARBINARY(256) AS (IF(state = 'running', flow_key, NULL)) STORED,
    ADD KEY leasehold_job_running_flow_key_idx (running_flow_key),
    ADD KEY leasehold_job_flow_key_idx (flow_key, state),
    ADD KEY leasehold_job_sequence_idx (sequence_key, id);

-- Per-key rate windows: the starts of one key in the current fixed window
-- of a queue's KeyRateLimit. The pruner deletes the rows whose window
-- ended, so the table holds at most one row per key that started a job in
-- the last window.
CREATE TABLE leasehold_key_window (
    scope        VARCHAR(8)     NOT NULL CHECK (scope IN ('queue', 'kind')),
    name         VARCHAR(128)   NOT NULL CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 128),
    flow_key     VARBINARY(256) NOT NULL,
    window_start DATETIME(6)    NOT NULL,
    window_end   DATETIME(6)    NOT NULL,
    window_count BIGINT         NOT NULL,
    PRIMARY KEY (scope, name, flow_key),
    KEY leasehold_key_window_end_idx (window_end)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
