-- leasehold:compatible-with 4
-- Leasehold schema, version 5: the registry of working clients. Times are
-- INTEGER microseconds since the Unix epoch (UTC), as in version 1.
--
-- One row per started client, upserted every few seconds by the client
-- itself and deleted when it stops; a row whose expires_at passed belongs to
-- a client that stopped beating (crashed, partitioned) and is pruned a lease
-- TTL later. Binaries that know version 4 never read the table, hence the
-- declaration above.
--
-- owner is the client's lease owner ("host:pid:id"); queues its queue names
-- joined by commas; running the leases it held at its last beat. Times are
-- the database clock.
CREATE TABLE leasehold_client (
    owner      TEXT    PRIMARY KEY CHECK (length(owner) BETWEEN 1 AND 400),
    host       TEXT    NOT NULL DEFAULT '',
    pid        INTEGER NOT NULL DEFAULT 0,
    client_id  TEXT    NOT NULL DEFAULT '',
    version    TEXT    NOT NULL DEFAULT '',
    queues     TEXT    NOT NULL DEFAULT '',
    running    INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
