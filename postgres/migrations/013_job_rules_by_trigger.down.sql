-- The update triggers get back their conditions of version 12, and the
-- rules go back to CHECK constraints of the same names. Adding them
-- reads the table once, under the lock the migration's transaction holds.
DROP TRIGGER IF EXISTS queue_key_reopen_trigger ON leasehold_job;
DROP TRIGGER IF EXISTS queue_key_move_trigger ON leasehold_job;
CREATE TRIGGER queue_key_update_trigger
    AFTER UPDATE OF queue, flow_key, state ON leasehold_job
    FOR EACH ROW
    WHEN (NEW.flow_key IS NOT NULL AND NEW.state <> 'completed'
        AND (OLD.state = 'completed' OR OLD.queue IS DISTINCT FROM NEW.queue
            OR OLD.flow_key IS DISTINCT FROM NEW.flow_key))
    EXECUTE FUNCTION leasehold_queue_key_add();

DROP TRIGGER attempt_keep_update_trigger ON leasehold_job;
CREATE TRIGGER attempt_keep_update_trigger
    AFTER UPDATE OF state, finalized_at, lease_token, completion_in_row ON leasehold_job
    FOR EACH ROW
    WHEN (OLD.completion_in_row AND OLD.state = 'completed' AND (NEW.state <> 'completed'
        OR NEW.finalized_at IS DISTINCT FROM OLD.finalized_at
        OR NEW.lease_token <> OLD.lease_token OR NOT NEW.completion_in_row))
    EXECUTE FUNCTION leasehold_attempt_keep();

DROP TRIGGER IF EXISTS job_rules_update_trigger ON leasehold_job;
DROP TRIGGER IF EXISTS job_rules_insert_trigger ON leasehold_job;
DROP FUNCTION IF EXISTS leasehold_job_rules_updated();
DROP FUNCTION IF EXISTS leasehold_job_rules_inserted();
DROP FUNCTION IF EXISTS leasehold_job_broken_rule(text, text, smallint, integer, bigint,
    smallint, text, text, text, text);

ALTER TABLE leasehold_job
    ADD CONSTRAINT leasehold_job_kind_check CHECK (char_length(kind) BETWEEN 1 AND 128),
    ADD CONSTRAINT leasehold_job_queue_check CHECK (char_length(queue) BETWEEN 1 AND 128),
    ADD CONSTRAINT leasehold_job_priority_check CHECK (priority BETWEEN 1 AND 4),
    ADD CONSTRAINT leasehold_job_max_attempts_check CHECK (max_attempts >= 1),
    ADD CONSTRAINT leasehold_job_lease_ttl_ms_check CHECK (lease_ttl_ms IS NULL OR lease_ttl_ms > 0),
    ADD CONSTRAINT leasehold_job_unique_finished_check CHECK (unique_finished BETWEEN 0 AND 7),
    ADD CONSTRAINT leasehold_job_flow_key_check CHECK (char_length(flow_key) BETWEEN 1 AND 256),
    ADD CONSTRAINT leasehold_job_sequence_key_check CHECK (char_length(sequence_key) BETWEEN 1 AND 256),
    ADD CONSTRAINT leasehold_job_stage_check CHECK (stage IS NULL OR octet_length(stage) BETWEEN 1 AND 128),
    ADD CONSTRAINT leasehold_job_dependency_policy_check CHECK (dependency_policy IN ('cancel', 'wait', 'any'));

