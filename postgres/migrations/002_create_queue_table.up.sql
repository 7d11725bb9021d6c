-- Leasehold schema, version 2: queue control. A queue with a row whose
-- paused_at is set is paused: the claim statement takes nothing from it.
-- Queues without a row are active.
CREATE TABLE leasehold_queue (
    name       text        PRIMARY KEY CHECK (char_length(name) BETWEEN 1 AND 128),
    paused_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);
