-- leasehold:compatible-with 5
-- Leasehold schema, version 6: wake-up rows, MySQL's and MariaDB's
-- stand-in for LISTEN/NOTIFY.
--
-- Every transaction that inserts available jobs into a queue bumps one row
-- of it once, whatever the number of jobs: version + 1, and its sender
-- appended to senders, which keeps the last 16, each 19 zero-padded decimal
-- digits, oldest first. A sender is a random identity of the inserting
-- transaction (0 when the inserting client does not track its own inserts),
-- so that a client can tell its own inserts from others'.
-- The row is the queue's slot CONNECTION_ID() % 16: the bump holds the row's
-- lock until the insert commits, and one row per queue would make
-- concurrent inserts into a queue commit one at a time. Listening clients
-- read the whole table (at most 16 rows per queue) every few milliseconds.
-- Rows are never deleted.
--
-- Binaries that know version 5 never read or write the table, hence the
-- declaration above: their inserts wake nobody, and clients find them by
-- polling as before.
CREATE TABLE leasehold_wakeup (
    queue   VARCHAR(128) NOT NULL CHECK (CHAR_LENGTH(queue) BETWEEN 1 AND 128),
    slot    SMALLINT     NOT NULL,
    version BIGINT       NOT NULL,
    senders VARCHAR(304) NOT NULL DEFAULT '',
    PRIMARY KEY (queue, slot)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
