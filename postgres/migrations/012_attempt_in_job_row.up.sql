-- Leasehold schema, version 12: a completed job's last attempt is kept in
-- its job row until the row changes or goes; the attempt history is a view.
--
-- A completion used to insert an attempt row beside the job's update. On a
-- one-job transaction (CompleteTx) that insert is a second table for the
-- executor to open, with its indexes and CHECK, its heap and index inserts
-- and their WAL: about a sixth of the server's time for the whole payment
-- transaction. The job row already holds everything that row said (the
-- lease's owner, token, window and heartbeats, the finish time in
-- finalized_at), so a completion now writes only the job row, and:
--
--   - leasehold_attempt_log is the old attempt table, renamed: one row per
--     ended lease, except the lease that completed a job that still holds
--     it;
--   - leasehold_job.completion_in_row marks a completed job whose row holds
--     the lease that completed it, which has no log row;
--   - leasehold_attempt is a view with the old table's columns: the log,
--     and the leases the marked rows hold. Queries that read the history
--     keep working and see every lease once.
--
-- The trigger below copies a marked row's lease into the log and clears
-- the mark when the row stops holding it, whoever changes it: moved out
-- of completed (a retry), or its finish time or token changed. A
-- statement-level trigger copies the marked rows a deletion takes
-- (retention, an operator, plain SQL) in one insert. The update trigger's
-- WHEN clause reads the old row's mark, false on the claim, completion and
-- heartbeat path.
--
-- The migration declares no compatibility: older binaries' attempt
-- pruning locks rows of leasehold_attempt FOR UPDATE, which a view of a
-- UNION refuses, and the read that confirms their CompleteTx commits
-- cannot probe the view by key. Replicas still running an older binary
-- while it applies keep their completions right: they insert attempt rows
-- into leasehold_attempt, completions included, and leave the mark false,
-- and an INSTEAD OF trigger on the view stores those rows in the log.
--
-- Adding a column with a constant default rewrites no row.
ALTER TABLE leasehold_job ADD COLUMN completion_in_row boolean NOT NULL DEFAULT false;

-- The new name is quoted: a schema-qualified name is not allowed there, and
-- the driver qualifies the unquoted names of its relations (Options.Schema).
ALTER TABLE leasehold_attempt RENAME TO "leasehold_attempt_log";

-- A job ID given as a value reaches each branch's primary key. A join to a
-- list of keys does not get inside a branch with a WHERE clause (Postgres
-- cannot make it an appendrel member), so the driver's read of many leases
-- (jobAttemptsOfLeasesSQL) reads the two tables itself.
CREATE VIEW leasehold_attempt AS
SELECT job_id, attempt, token, owner, leased_at, lease_until, last_heartbeat_at,
    heartbeats, finished_at, outcome, error
FROM leasehold_attempt_log
UNION ALL
SELECT id, attempt, lease_token, lease_owner, leased_at, lease_until,
    heartbeat_at, heartbeats, finalized_at, 'completed'::text, NULL::text
FROM leasehold_job
WHERE completion_in_row;

CREATE FUNCTION leasehold_attempt_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO leasehold_attempt_log (job_id, attempt, token, owner, leased_at,
        lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error)
    VALUES (OLD.id, OLD.attempt, OLD.lease_token, OLD.lease_owner, OLD.leased_at,
        OLD.lease_until, OLD.heartbeat_at, OLD.heartbeats, OLD.finalized_at, 'completed', NULL)
    ON CONFLICT (job_id, token) DO NOTHING;
    -- The driver's statements clear the mark themselves; plain SQL and older
    -- binaries do not. This update runs the trigger again only where the
    -- row is still completed, and then its insert finds the lease logged.
    IF NEW.completion_in_row THEN
        UPDATE leasehold_job SET completion_in_row = false WHERE id = NEW.id;
    END IF;
    RETURN NULL;
END
$$;

-- An AFTER trigger: with a BEFORE row trigger on the table, Postgres fetches
-- and locks each row an update takes before updating it (GetTupleForTrigger),
-- whatever the trigger's WHEN clause says: claims and completions included.
CREATE TRIGGER attempt_keep_update_trigger
    AFTER UPDATE OF state, finalized_at, lease_token, completion_in_row ON leasehold_job
    FOR EACH ROW
    WHEN (OLD.completion_in_row AND OLD.state = 'completed' AND (NEW.state <> 'completed'
        OR NEW.finalized_at IS DISTINCT FROM OLD.finalized_at
        OR NEW.lease_token <> OLD.lease_token OR NOT NEW.completion_in_row))
    EXECUTE FUNCTION leasehold_attempt_keep();

CREATE FUNCTION leasehold_attempt_keep_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO leasehold_attempt_log (job_id, attempt, token, owner, leased_at,
        lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error)
    SELECT id, attempt, lease_token, lease_owner, leased_at,
        lease_until, heartbeat_at, heartbeats, finalized_at, 'completed', NULL
    FROM gone_jobs
    WHERE completion_in_row
    ON CONFLICT (job_id, token) DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER attempt_keep_delete_trigger
    AFTER DELETE ON leasehold_job
    REFERENCING OLD TABLE AS gone_jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION leasehold_attempt_keep_deleted();

CREATE FUNCTION leasehold_attempt_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO leasehold_attempt_log (job_id, attempt, token, owner, leased_at,
        lease_until, last_heartbeat_at, heartbeats, finished_at, outcome, error)
    VALUES (NEW.job_id, NEW.attempt, NEW.token, NEW.owner, NEW.leased_at,
        NEW.lease_until, NEW.last_heartbeat_at, NEW.heartbeats,
        coalesce(NEW.finished_at, now()), NEW.outcome, NEW.error);
    RETURN NEW;
END
$$;

CREATE TRIGGER attempt_insert_trigger
    INSTEAD OF INSERT ON leasehold_attempt
    FOR EACH ROW
    EXECUTE FUNCTION leasehold_attempt_insert();
