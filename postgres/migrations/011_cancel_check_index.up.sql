-- leasehold:compatible-with 10
-- Leasehold schema, version 11: the cancellation check reads its own index
-- whatever the table's statistics say.
--
-- Every client holding leases asks four times a second for the leases of
-- its own that an operator asked to cancel (jobCancelRequestedSQL). Its
-- index held just those jobs, keyed by lease owner. With statistics taken
-- while every job was available (a fresh backlog, analyzed before any
-- worker ran), the planner costed that index above the running-jobs index,
-- whose leading column (id) follows the table's order: the check then
-- walked every running job's entry, dead ones included, and filtered them
-- (4 ms with 20,000 jobs running, 5.5 ms per check in a 100,000-job
-- drain). Keyed by id first, the small index costs less than the running
-- index in every statistics state tried (never analyzed, analyzed on a
-- fresh backlog, with and without jobs running, after a vacuum), and its
-- entries come in the check's order.
--
-- The index holds only running jobs with a cancellation request, but its
-- build reads the whole table and blocks writes to it while it does. On a
-- large table build it beforehand with CREATE INDEX CONCURRENTLY under the
-- definition below; the migration then skips it. Binaries that know
-- version 10 send the same query, hence the declaration.
CREATE INDEX IF NOT EXISTS leasehold_job_cancel_requested_idx ON leasehold_job (id, lease_owner)
    WHERE state = 'running' AND cancel_requested_at IS NOT NULL;
DROP INDEX IF EXISTS leasehold_job_cancel_idx;
