-- leasehold:compatible-with 7
-- Leasehold schema, version 8: fenced stage checkpoints and job
-- dependencies.
--
-- stage and stage_state hold the last stage a lease checkpointed and its
-- JSON state (leasehold.Checkpoint), read by the next attempt; the stage
-- history (leasehold_stage) keeps every checkpoint, apart from the hot row.
-- Neither column is indexed, so a checkpoint stays a HOT update like a
-- heartbeat.
--
-- A job inserted with dependencies waits in state 'pending' with
-- deps_pending counting the dependencies not yet completed, one
-- leasehold_job_dep row per edge. The trigger below runs in the statement
-- that changes a parent's state, whatever writes it (the completer's batch,
-- CompleteTx, an operator): a completion marks its edges satisfied and
-- decrements each waiting child, under the child's row lock, so that two
-- parents completing at once on different clients never both miss the
-- last one; the child reaching zero becomes available (or scheduled) in
-- that same statement. A discarded or cancelled parent cancels the waiting
-- children whose dependency_policy is 'cancel' (cancelled_by_dep names it;
-- nested triggers carry it down the graph); retrying that parent puts them
-- back to pending. A child with dependency_policy 'any' (a batch's
-- callback) counts a discarded or cancelled parent as finished, as a
-- completed one. has_dependents keeps the trigger from running for jobs
-- nobody waits on. Binaries that know version 7 never see a pending job
-- (they claim, expire and prune other states only), hence the declaration.
ALTER TABLE leasehold_job
    ADD COLUMN stage             text CHECK (stage IS NULL OR octet_length(stage) BETWEEN 1 AND 128),
    ADD COLUMN stage_state       jsonb,
    ADD COLUMN deps_pending      integer NOT NULL DEFAULT 0,
    ADD COLUMN has_dependents    boolean NOT NULL DEFAULT false,
    ADD COLUMN dependency_policy text    NOT NULL DEFAULT 'cancel' CHECK (dependency_policy IN ('cancel', 'wait', 'any')),
    ADD COLUMN cancelled_by_dep  bigint;

ALTER TABLE leasehold_job DROP CONSTRAINT leasehold_job_state_check;
ALTER TABLE leasehold_job ADD CONSTRAINT leasehold_job_state_check CHECK (state IN
    ('pending', 'available', 'scheduled', 'running', 'retryable',
     'completed', 'discarded', 'cancelled', 'stuck'));

CREATE TABLE leasehold_stage (
    id      bigserial   PRIMARY KEY,
    job_id  bigint      NOT NULL,
    attempt integer     NOT NULL,
    token   bigint      NOT NULL,
    stage   text        NOT NULL,
    state   jsonb,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX leasehold_stage_job_idx ON leasehold_stage (job_id, id);

CREATE TABLE leasehold_job_dep (
    parent_id bigint  NOT NULL,
    child_id  bigint  NOT NULL,
    satisfied boolean NOT NULL DEFAULT false,
    PRIMARY KEY (parent_id, child_id)
);
CREATE INDEX leasehold_job_dep_child_idx ON leasehold_job_dep (child_id);

CREATE FUNCTION leasehold_job_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    queues text[];
BEGIN
    IF NEW.state = 'completed' THEN
        WITH satisfied AS (
            UPDATE leasehold_job_dep SET satisfied = true
            WHERE parent_id = NEW.id AND NOT satisfied
            RETURNING child_id
        ), released AS (
            UPDATE leasehold_job SET
                deps_pending = deps_pending - 1,
                state = CASE WHEN deps_pending > 1 THEN state
                    WHEN scheduled_at > now() THEN 'scheduled' ELSE 'available' END,
                scheduled_at = CASE WHEN deps_pending > 1 THEN scheduled_at
                    ELSE greatest(scheduled_at, now()) END
            FROM satisfied
            WHERE id = satisfied.child_id AND state = 'pending'
            RETURNING queue, state
        )
        SELECT array_agg(DISTINCT queue) INTO queues FROM released WHERE state = 'available';
        -- Wake the released jobs' queues, as an insert would (at commit).
        PERFORM pg_notify('leasehold_insert', q) FROM unnest(queues) AS q;
    ELSIF NEW.state IN ('discarded', 'cancelled') THEN
        -- Children with the 'any' policy (batch callbacks) count a failed
        -- parent as finished.
        WITH satisfied AS (
            UPDATE leasehold_job_dep d SET satisfied = true
            FROM leasehold_job c
            WHERE d.parent_id = NEW.id AND NOT d.satisfied
                AND c.id = d.child_id AND c.dependency_policy = 'any'
            RETURNING d.child_id
        ), released AS (
            UPDATE leasehold_job SET
                deps_pending = deps_pending - 1,
                state = CASE WHEN deps_pending > 1 THEN state
                    WHEN scheduled_at > now() THEN 'scheduled' ELSE 'available' END,
                scheduled_at = CASE WHEN deps_pending > 1 THEN scheduled_at
                    ELSE greatest(scheduled_at, now()) END
            FROM satisfied
            WHERE id = satisfied.child_id AND state = 'pending'
            RETURNING queue, state
        )
        SELECT array_agg(DISTINCT queue) INTO queues FROM released WHERE state = 'available';
        -- Wake the released jobs' queues, as an insert would (at commit).
        PERFORM pg_notify('leasehold_insert', q) FROM unnest(queues) AS q;
        UPDATE leasehold_job SET
            state = 'cancelled',
            finalized_at = now(),
            cancelled_by_dep = NEW.id,
            last_error = format('cancelled: dependency %s was %s', NEW.id, NEW.state)
        FROM leasehold_job_dep d
        WHERE d.parent_id = NEW.id AND NOT d.satisfied AND leasehold_job.id = d.child_id
            AND leasehold_job.state = 'pending' AND leasehold_job.dependency_policy = 'cancel';
    ELSIF OLD.state IN ('discarded', 'cancelled') THEN
        UPDATE leasehold_job SET
            state = 'pending',
            finalized_at = NULL,
            cancelled_by_dep = NULL,
            last_error = format('pending again: dependency %s was retried', NEW.id)
        FROM leasehold_job_dep d
        WHERE d.parent_id = NEW.id AND leasehold_job.id = d.child_id
            AND leasehold_job.state = 'cancelled' AND leasehold_job.cancelled_by_dep = NEW.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER dependents_trigger
    AFTER UPDATE OF state ON leasehold_job
    FOR EACH ROW
    WHEN (NEW.has_dependents AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION leasehold_job_dependents();
