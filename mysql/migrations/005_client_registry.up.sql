-- leasehold:compatible-with 4
-- Leasehold schema, version 5: the registry of working clients.
--
-- One row per started client, upserted every few seconds by the client
-- itself and deleted when it stops; a row whose expires_at passed belongs to
-- a client that stopped beating (crashed, partitioned) and is pruned a lease
-- TTL later. Binaries that know version 4 never read the table, hence the
-- declaration above.
--
-- owner is the client's lease owner ("host:pid:id"); queues its queue names
-- joined by commas; running the leases it held at its last beat. Times are
-- the database clock (UTC).
CREATE TABLE leasehold_client (
    owner      VARCHAR(400) NOT NULL PRIMARY KEY,
    host       VARCHAR(255) NOT NULL DEFAULT '',
    pid        BIGINT       NOT NULL DEFAULT 0,
    client_id  VARCHAR(255) NOT NULL DEFAULT '',
    version    VARCHAR(255) NOT NULL DEFAULT '',
    queues     TEXT         NOT NULL,
    running    BIGINT       NOT NULL DEFAULT 0,
    started_at DATETIME(6)  NOT NULL,
    seen_at    DATETIME(6)  NOT NULL,
    expires_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
