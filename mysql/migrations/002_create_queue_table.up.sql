-- Leasehold schema, version 2: queue control. A queue with a row whose
-- paused_at is set is paused: the claim statement takes nothing from it.
-- Queues without a row are active.
CREATE TABLE leasehold_queue (
    name       VARCHAR(128) NOT NULL PRIMARY KEY CHECK (CHAR_LENGTH(name) BETWEEN 1 AND 128),
    paused_at  DATETIME(6),
    updated_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
