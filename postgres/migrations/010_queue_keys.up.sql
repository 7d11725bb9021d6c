-- leasehold:compatible-with 9
-- Leasehold schema, version 10: the keys of each queue, so that a keyed
-- claim steps over a key whose jobs all run without reading its jobs.
--
-- leasehold_queue_key holds a row for every (queue, flow key) of a job
-- that is not completed (it may be waiting, running, failed, or pending
-- its dependencies; any of them may be claimable again). The keyed claim
-- walks the queue's rows in key order from its cursor (leasehold_limit.
-- key_cursor, migration 9) with a range scan, counts each key's running
-- jobs, and reads jobs only of the keys with a free slot: a full key costs
-- a count, not the index probe that found the next key among the jobs.
--
-- The triggers add a key when a job gets one: at insert (whatever writes
-- it, COPY included), and when an update gives a job that is not completed
-- a queue or key it did not have, or makes a completed job unfinished
-- again. A job without a key costs them nothing (the WHEN clauses), nor
-- does a claim, heartbeat or completion. Keys whose jobs are all completed
-- or gone are deleted by the pruner (the driver's QueueKeyPrune), which
-- locks the table in SHARE mode for its delete: every transaction that
-- added a key row, or found it there (the INSERT takes ROW EXCLUSIVE
-- either way), has ended before the delete's snapshot is taken, so a key
-- is never deleted while a job of it is being inserted.
--
-- Binaries that know version 9 neither read nor prune the table; the
-- triggers keep it whole for the jobs they insert, hence the declaration.
CREATE TABLE leasehold_queue_key (
    queue    text NOT NULL,
    flow_key text NOT NULL,
    PRIMARY KEY (queue, flow_key)
);

INSERT INTO leasehold_queue_key (queue, flow_key)
SELECT DISTINCT queue, flow_key FROM leasehold_job
WHERE flow_key IS NOT NULL AND state <> 'completed'
ON CONFLICT DO NOTHING;

CREATE FUNCTION leasehold_queue_key_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO leasehold_queue_key (queue, flow_key) VALUES (NEW.queue, NEW.flow_key)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER queue_key_insert_trigger
    AFTER INSERT ON leasehold_job
    FOR EACH ROW
    WHEN (NEW.flow_key IS NOT NULL)
    EXECUTE FUNCTION leasehold_queue_key_add();

CREATE TRIGGER queue_key_update_trigger
    AFTER UPDATE OF queue, flow_key, state ON leasehold_job
    FOR EACH ROW
    WHEN (NEW.flow_key IS NOT NULL AND NEW.state <> 'completed'
        AND (OLD.state = 'completed' OR OLD.queue IS DISTINCT FROM NEW.queue
            OR OLD.flow_key IS DISTINCT FROM NEW.flow_key))
    EXECUTE FUNCTION leasehold_queue_key_add();
