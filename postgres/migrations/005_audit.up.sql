-- leasehold:compatible-with 4
-- Leasehold schema, version 5: the audit trail of operator actions.
--
-- One row per action (a retry, a cancellation, a queue paused) or per batch
-- of a bulk action, written in the action's transaction. Binaries that know
-- version 4 never read the table, hence the declaration above.
--
-- job_id is the job of a single-job action; job_ids the jobs a bulk batch
-- changed, as text ",1,2,3," so that a job's entries are found with LIKE on
-- every backend. at is the database clock.
CREATE TABLE leasehold_audit (
    id      bigserial   PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text        NOT NULL CHECK (length(actor) BETWEEN 1 AND 200),
    action  text        NOT NULL CHECK (length(action) BETWEEN 1 AND 64),
    queue   text        NOT NULL DEFAULT '',
    job_id  bigint,
    job_ids text,
    count   bigint      NOT NULL DEFAULT 0,
    note    text        NOT NULL DEFAULT '',
    detail  text        NOT NULL DEFAULT ''
);
-- A job page lists the job's entries; newest first is the primary key
-- read backwards, and a time window reads this index.
CREATE INDEX leasehold_audit_job_idx ON leasehold_audit (job_id, id) WHERE job_id IS NOT NULL;
CREATE INDEX leasehold_audit_at_idx ON leasehold_audit (at);
