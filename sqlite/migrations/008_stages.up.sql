-- leasehold:compatible-with 7
-- Leasehold schema, version 8: fenced stage checkpoints and job
-- dependencies. Times are INTEGER microseconds since the Unix epoch (UTC).
--
-- stage and stage_state hold the last stage a lease checkpointed and its
-- JSON state (leasehold.Checkpoint); leasehold_stage keeps every checkpoint.
--
-- A job inserted with dependencies waits in state 'pending', deps_pending
-- counting the dependencies not yet completed, one leasehold_job_dep row per
-- edge. The triggers below run inside the statement that changes a
-- parent's state, whatever writes it: a completion decrements each waiting
-- child and makes the one reaching zero available (or scheduled); a
-- discarded or cancelled parent cancels the waiting children whose
-- dependency_policy is 'cancel' (cancelled_by_dep names it); a retried
-- parent puts them back to pending. A child with dependency_policy 'any'
-- (a batch's callback) counts a failed parent as finished. Cancellation carries down the graph
-- through nested triggers, which need recursive_triggers on (sqlite.DSN
-- sets it). has_dependents keeps the triggers off jobs nobody waits on.
--
-- SQLite cannot alter a CHECK constraint; adding 'pending' to the state
-- check edits the stored table definition, as SQLite's documentation
-- allows for a change that leaves the stored rows valid (lang_altertable,
-- "otheralter"). The ALTER TABLE statements after it change the schema
-- cookie, so every connection reloads the definition. Binaries that know
-- version 7 never see a pending job (they claim, expire and prune other
-- states only), hence the declaration above.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '(''available'', ''scheduled'', ''running'', ''retryable'',',
                       '(''pending'', ''available'', ''scheduled'', ''running'', ''retryable'',')
WHERE type = 'table' AND name = 'leasehold_job';
PRAGMA writable_schema = RESET;

ALTER TABLE leasehold_job ADD COLUMN stage TEXT CHECK (stage IS NULL OR length(CAST(stage AS BLOB)) BETWEEN 1 AND 128);
ALTER TABLE leasehold_job ADD COLUMN stage_state TEXT;
ALTER TABLE leasehold_job ADD COLUMN deps_pending INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leasehold_job ADD COLUMN has_dependents INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leasehold_job ADD COLUMN dependency_policy TEXT NOT NULL DEFAULT 'cancel' CHECK (dependency_policy IN ('cancel', 'wait', 'any'));
ALTER TABLE leasehold_job ADD COLUMN cancelled_by_dep INTEGER;

CREATE TABLE leasehold_stage (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id  INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    token   INTEGER NOT NULL,
    stage   TEXT    NOT NULL,
    state   TEXT,
    at      INTEGER NOT NULL
);
CREATE INDEX leasehold_stage_job_idx ON leasehold_stage (job_id, id);

CREATE TABLE leasehold_job_dep (
    parent_id INTEGER NOT NULL,
    child_id  INTEGER NOT NULL,
    satisfied INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (parent_id, child_id)
) WITHOUT ROWID;
CREATE INDEX leasehold_job_dep_child_idx ON leasehold_job_dep (child_id);

CREATE TRIGGER leasehold_job_dep_completed
AFTER UPDATE OF state ON leasehold_job
FOR EACH ROW WHEN NEW.has_dependents AND NEW.state = 'completed' AND OLD.state <> 'completed'
BEGIN
    UPDATE leasehold_job SET
        deps_pending = deps_pending - 1,
        state = CASE WHEN deps_pending > 1 THEN state
            WHEN scheduled_at > CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000 THEN 'scheduled'
            ELSE 'available' END,
        scheduled_at = CASE WHEN deps_pending > 1 THEN scheduled_at
            ELSE max(scheduled_at, CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000) END
    WHERE state = 'pending'
        AND id IN (SELECT child_id FROM leasehold_job_dep WHERE parent_id = NEW.id AND NOT satisfied);
    UPDATE leasehold_job_dep SET satisfied = 1 WHERE parent_id = NEW.id AND NOT satisfied;
END;

CREATE TRIGGER leasehold_job_dep_failed
AFTER UPDATE OF state ON leasehold_job
FOR EACH ROW WHEN NEW.has_dependents AND NEW.state IN ('discarded', 'cancelled')
    AND OLD.state NOT IN ('discarded', 'cancelled')
BEGIN
    UPDATE leasehold_job SET
        state = 'cancelled',
        finalized_at = CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000,
        cancelled_by_dep = NEW.id,
        last_error = 'cancelled: dependency ' || NEW.id || ' was ' || NEW.state
    WHERE state = 'pending' AND dependency_policy = 'cancel'
        AND id IN (SELECT child_id FROM leasehold_job_dep WHERE parent_id = NEW.id AND NOT satisfied);
    -- Children with the 'any' policy (batch callbacks) count a failed
    -- parent as finished.
    UPDATE leasehold_job SET
        deps_pending = deps_pending - 1,
        state = CASE WHEN deps_pending > 1 THEN state
            WHEN scheduled_at > CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000 THEN 'scheduled'
            ELSE 'available' END,
        scheduled_at = CASE WHEN deps_pending > 1 THEN scheduled_at
            ELSE max(scheduled_at, CAST(round(unixepoch('subsec') * 1000) AS INTEGER) * 1000) END
    WHERE state = 'pending' AND dependency_policy = 'any'
        AND id IN (SELECT child_id FROM leasehold_job_dep WHERE parent_id = NEW.id AND NOT satisfied);
    UPDATE leasehold_job_dep SET satisfied = 1
    WHERE parent_id = NEW.id AND NOT satisfied
        AND child_id IN (SELECT id FROM leasehold_job WHERE id = child_id AND dependency_policy = 'any');
END;

CREATE TRIGGER leasehold_job_dep_retried
AFTER UPDATE OF state ON leasehold_job
FOR EACH ROW WHEN NEW.has_dependents AND OLD.state IN ('discarded', 'cancelled')
    AND NEW.state NOT IN ('discarded', 'cancelled')
BEGIN
    UPDATE leasehold_job SET
        state = 'pending',
        finalized_at = NULL,
        cancelled_by_dep = NULL,
        last_error = 'pending again: dependency ' || NEW.id || ' was retried'
    WHERE state = 'cancelled' AND cancelled_by_dep = NEW.id
        AND id IN (SELECT child_id FROM leasehold_job_dep WHERE parent_id = NEW.id);
END;
