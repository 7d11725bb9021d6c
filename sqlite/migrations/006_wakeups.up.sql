-- leasehold:compatible-with 5
-- Leasehold schema, version 6: wake-up rows, SQLite's stand-in for
-- LISTEN/NOTIFY.
--
-- One row per queue that ever got an available job by an insert (or a
-- resume). Every write transaction that inserts available jobs into a queue
-- bumps its row once, whatever the number of jobs: version + 1, and its
-- sender appended to senders, which keeps the last 16, each 19 zero-padded
-- decimal digits, oldest first. A sender is a random identity of the
-- inserting transaction (0 when the inserting client does not track its own
-- inserts), so that a client can tell its own inserts from others'. Listening clients read PRAGMA data_version every few
-- milliseconds and this table only when another connection has committed.
-- Rows are never deleted; a queue's row is a few bytes.
--
-- Binaries that know version 5 never read or write the table, hence the
-- declaration above: their inserts wake nobody, and clients find them by
-- polling as before.
CREATE TABLE leasehold_wakeup (
    queue   TEXT    PRIMARY KEY CHECK (length(queue) BETWEEN 1 AND 128),
    version INTEGER NOT NULL,
    senders TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
