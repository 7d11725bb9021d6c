-- leasehold:compatible-with 5
-- Leasehold schema, version 6: the registry of working clients.
--
-- One row per started client, upserted every few seconds by the client
-- itself and deleted when it stops; a row whose expires_at passed belongs to
-- a client that stopped beating (crashed, partitioned) and is pruned a lease
-- TTL later. Binaries that know version 5 never read the table, hence the
-- declaration above.
--
-- owner is the client's lease owner ("host:pid:id"); queues its queue names
-- joined by commas; running the leases it held at its last beat. Times are
-- the database clock.
CREATE TABLE leasehold_client (
    owner      text        PRIMARY KEY CHECK (length(owner) BETWEEN 1 AND 400),
    host       text        NOT NULL DEFAULT '',
    pid        bigint      NOT NULL DEFAULT 0,
    client_id  text        NOT NULL DEFAULT '',
    version    text        NOT NULL DEFAULT '',
    queues     text        NOT NULL DEFAULT '',
    running    bigint      NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT now(),
    seen_at    timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
