-- leasehold:compatible-with 3
-- Leasehold schema, version 4: the audit trail of operator actions.
--
-- One row per action (a retry, a cancellation, a queue paused) or per batch
-- of a bulk action, written in the action's transaction. Binaries that know
-- version 3 never read the table, hence the declaration above.
--
-- job_id is the job of a single-job action; job_ids the jobs a bulk batch
-- changed, as text ",1,2,3," so that a job's entries are found with LIKE on
-- every backend. at is the database clock (UTC).
CREATE TABLE leasehold_audit (
    id      BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at      DATETIME(6)  NOT NULL,
    actor   VARCHAR(200) NOT NULL,
    action  VARCHAR(64)  NOT NULL,
    queue   VARCHAR(128) NOT NULL DEFAULT '',
    job_id  BIGINT       NULL,
    job_ids MEDIUMTEXT   NULL,
    count   BIGINT       NOT NULL DEFAULT 0,
    note    TEXT         NOT NULL,
    detail  TEXT         NOT NULL,
    -- A job page lists the job's entries; newest first is the primary key
    -- read backwards, and a time window reads at.
    KEY leasehold_audit_job_idx (job_id, id),
    KEY leasehold_audit_at_idx (at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
