-- leasehold:compatible-with 3
-- Leasehold schema, version 4: the audit trail of operator actions. Times
-- are INTEGER microseconds since the Unix epoch (UTC), as in version 1.
--
-- One row per action (a retry, a cancellation, a queue paused) or per batch
-- of a bulk action, written in the action's transaction. Binaries that know
-- version 3 never read the table, hence the declaration above.
--
-- job_id is the job of a single-job action; job_ids the jobs a bulk batch
-- changed, as text ",1,2,3," so that a job's entries are found with LIKE on
-- every backend. at is the database clock.
CREATE TABLE leasehold_audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    actor   TEXT    NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    action  TEXT    NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    queue   TEXT    NOT NULL DEFAULT '',
    job_id  INTEGER,
    job_ids TEXT,
    count   INTEGER NOT NULL DEFAULT 0,
    note    TEXT    NOT NULL DEFAULT '',
    detail  TEXT    NOT NULL DEFAULT ''
);
-- A job page lists the job's entries; newest first is the primary key
-- read backwards, and a time window reads this index.
CREATE INDEX leasehold_audit_job_idx ON leasehold_audit (job_id, id) WHERE job_id IS NOT NULL;
CREATE INDEX leasehold_audit_at_idx ON leasehold_audit (at);
