-- leasehold:compatible-with 8
-- Leasehold schema, version 9: a dependent made available wakes its
-- queue's clients.
--
-- The dependency triggers of version 8 make a pending job available when
-- its last dependency completes (or, for the 'any' policy, finishes); this
-- trigger bumps the queue's wake-up row (version 6) for each job that goes
-- from pending to available, naming no sender (19 zeros): every client
-- that works the queue, in any process, claims it at once instead of at
-- its next poll. The dependency triggers fire it from within their own
-- updates (recursive_triggers, set by the driver's DSN).
--
-- Binaries that know version 8 do not need it: their clients find such
-- jobs by polling, as before, hence the declaration above.
CREATE TRIGGER leasehold_job_dep_wakeup
AFTER UPDATE OF state ON leasehold_job
FOR EACH ROW WHEN OLD.state = 'pending' AND NEW.state = 'available'
BEGIN
    INSERT INTO leasehold_wakeup (queue, version, senders) VALUES (NEW.queue, 1, printf('%019d', 0))
    ON CONFLICT (queue) DO UPDATE SET version = version + 1, senders = substr(senders || excluded.senders, -304);
END;
