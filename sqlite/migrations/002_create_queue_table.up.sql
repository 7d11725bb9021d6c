-- Leasehold schema, version 2: queue control. A queue with a row whose
-- paused_at is set is paused: the claim statement takes nothing from it.
-- Queues without a row are active. Times are microseconds since the epoch.
CREATE TABLE leasehold_queue (
    name       TEXT    PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    paused_at  INTEGER,
    updated_at INTEGER NOT NULL
);
