-- leasehold:compatible-with 12
-- Leasehold schema, version 13: the job table's rules on the columns that a
-- job's life does not change are kept by triggers instead of CHECK
-- constraints; the rules on state and expiry_policy stay CHECKs.
--
-- Postgres prepares a table's CHECK constraints again for every statement
-- that inserts or updates it, whatever columns the statement sets: each
-- constraint's expression is read back from its stored text and planned
-- (ExecRelCheck). The job table had twelve, 12 KB of that text, and every
-- claim, heartbeat, completion and failure updates it: about 50 µs of
-- server time per statement on a 2-core machine, a sixth to a fifth of a
-- one-job transaction that completes a job with CompleteTx (the profile of
-- a one-row update: ExecConstraints 25% of the backend's time, most of it
-- stringToNode).
--
-- Ten of those rules are on columns that only an insert sets, an operator's
-- update, a handler's checkpoint (stage) or a new job's dependencies
-- (dependency_policy): kind, queue, priority, max_attempts, lease_ttl_ms,
-- unique_finished, flow_key, sequence_key, stage and dependency_policy. The
-- claim sets state and expiry_policy (a kind's policy), whose rules stay
-- CHECKs. The ten are now checked
--
--   - after every insert statement, all of its rows in one query over the
--     statement's new rows (a transition table): a single insert, a bulk
--     insert, COPY and INSERT ... ON CONFLICT alike;
--   - after an update statement that names one of those columns in its SET
--     list, row by row (a trigger on UPDATE OF those columns: the claim,
--     heartbeat, outcome and expiry statements name none of them, so
--     Postgres does not queue it for them). An AFTER trigger: with a
--     BEFORE row trigger on the table Postgres would lock every row an
--     update takes before updating it (see version 12).
--
-- A row that breaks a rule fails the statement as the CHECK did: SQLSTATE
-- 23514 (check_violation) naming the constraint the rule had, so the error
-- reads the same to code that matched on either. The rules are the old
-- CHECK expressions unchanged, and like a CHECK a rule that reads NULL
-- holds. Rows already in the table kept these rules, which were CHECKs
-- until now: nothing is read back.
--
-- The update triggers' WHEN conditions are read back from their text the
-- same way, for every statement that sets one of their columns: state, so
-- every claim and outcome, 4.4 KB of it (16-30 µs a one-row update). Two of
-- them are rewritten to say less where saying more changed nothing:
--
--   - attempt_keep_update_trigger runs whenever the old row holds its
--     completed lease (completion_in_row, which only a completed row has):
--     moving that lease into the log and clearing the mark keeps the
--     history right whether or not the update moved the lease, and no
--     statement of the lease path updates such a row;
--   - queue_key_update_trigger becomes two: a job moved to another queue
--     or key (UPDATE OF queue, flow_key, which the lease path never sets),
--     and an update of a completed job's state. leasehold_queue_key_add
--     inserts the key row if missing, so running it for an update that
--     needed no key adds nothing the pruner does not take back.
--
-- dependents_trigger's condition is already short.
--
-- Binaries that know version 12 run unchanged on this one: no statement of
-- theirs depends on the constraints or on the triggers' conditions.
-- Dropping a constraint and creating a trigger each take the table's lock
-- for a moment; nothing is rewritten or scanned.

-- leasehold_job_broken_rule returns the name of the first of the rules
-- above that a job's columns break, NULL when they keep them all. A
-- single-expression SQL function: the planner inlines it into the queries
-- of the triggers below.
CREATE FUNCTION leasehold_job_broken_rule(kind text, queue text, priority smallint,
    max_attempts integer, lease_ttl_ms bigint, unique_finished smallint,
    flow_key text, sequence_key text, stage text, dependency_policy text)
RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT CASE
    WHEN NOT (char_length(kind) BETWEEN 1 AND 128) THEN 'leasehold_job_kind_check'
    WHEN NOT (char_length(queue) BETWEEN 1 AND 128) THEN 'leasehold_job_queue_check'
    WHEN NOT (priority BETWEEN 1 AND 4) THEN 'leasehold_job_priority_check'
    WHEN NOT (max_attempts >= 1) THEN 'leasehold_job_max_attempts_check'
    WHEN NOT (lease_ttl_ms IS NULL OR lease_ttl_ms > 0) THEN 'leasehold_job_lease_ttl_ms_check'
    WHEN NOT (unique_finished BETWEEN 0 AND 7) THEN 'leasehold_job_unique_finished_check'
    WHEN NOT (char_length(flow_key) BETWEEN 1 AND 256) THEN 'leasehold_job_flow_key_check'
    WHEN NOT (char_length(sequence_key) BETWEEN 1 AND 256) THEN 'leasehold_job_sequence_key_check'
    WHEN NOT (stage IS NULL OR octet_length(stage) BETWEEN 1 AND 128) THEN 'leasehold_job_stage_check'
    WHEN NOT (dependency_policy IN ('cancel', 'wait', 'any')) THEN 'leasehold_job_dependency_policy_check'
END
$$;

-- leasehold_job_rules_inserted checks the rows an insert statement wrote.
CREATE FUNCTION leasehold_job_rules_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    bad_id bigint;
    broken text;
BEGIN
    SELECT r.id, r.rule INTO bad_id, broken
    FROM (SELECT n.id, leasehold_job_broken_rule(n.kind, n.queue, n.priority,
            n.max_attempts, n.lease_ttl_ms, n.unique_finished, n.flow_key,
            n.sequence_key, n.stage, n.dependency_policy) AS rule
        FROM inserted_jobs n) r
    WHERE r.rule IS NOT NULL
    LIMIT 1;
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken,
                TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA,
                DETAIL = format('Failing row has id %s.', bad_id);
    END IF;
    RETURN NULL;
END
$$;

-- leasehold_job_rules_updated checks a row an update statement changed.
CREATE FUNCTION leasehold_job_rules_updated() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    broken text := leasehold_job_broken_rule(NEW.kind, NEW.queue, NEW.priority,
        NEW.max_attempts, NEW.lease_ttl_ms, NEW.unique_finished,
        NEW.flow_key, NEW.sequence_key, NEW.stage, NEW.dependency_policy);
BEGIN
    IF broken IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "%" violates check constraint "%"', TG_TABLE_NAME, broken
            USING ERRCODE = 'check_violation', CONSTRAINT = broken,
                TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA,
                DETAIL = format('Failing row has id %s.', NEW.id);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER attempt_keep_update_trigger ON leasehold_job;
CREATE TRIGGER attempt_keep_update_trigger
    AFTER UPDATE OF state, finalized_at, lease_token, completion_in_row ON leasehold_job
    FOR EACH ROW
    WHEN (OLD.completion_in_row)
    EXECUTE FUNCTION leasehold_attempt_keep();

DROP TRIGGER queue_key_update_trigger ON leasehold_job;
CREATE TRIGGER queue_key_move_trigger
    AFTER UPDATE OF queue, flow_key ON leasehold_job
    FOR EACH ROW
    WHEN (NEW.flow_key IS NOT NULL AND NEW.state <> 'completed')
    EXECUTE FUNCTION leasehold_queue_key_add();
CREATE TRIGGER queue_key_reopen_trigger
    AFTER UPDATE OF state ON leasehold_job
    FOR EACH ROW
    WHEN (OLD.state = 'completed' AND NEW.flow_key IS NOT NULL)
    EXECUTE FUNCTION leasehold_queue_key_add();

CREATE TRIGGER job_rules_insert_trigger
    AFTER INSERT ON leasehold_job
    REFERENCING NEW TABLE AS inserted_jobs
    FOR EACH STATEMENT
    EXECUTE FUNCTION leasehold_job_rules_inserted();

CREATE TRIGGER job_rules_update_trigger
    AFTER UPDATE OF kind, queue, priority, max_attempts, lease_ttl_ms, unique_finished,
        flow_key, sequence_key, stage, dependency_policy ON leasehold_job
    FOR EACH ROW
    EXECUTE FUNCTION leasehold_job_rules_updated();

ALTER TABLE leasehold_job
    DROP CONSTRAINT IF EXISTS leasehold_job_kind_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_queue_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_priority_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_max_attempts_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_lease_ttl_ms_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_unique_finished_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_flow_key_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_sequence_key_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_stage_check,
    DROP CONSTRAINT IF EXISTS leasehold_job_dependency_policy_check;
