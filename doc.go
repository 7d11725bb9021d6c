/*
Package leasehold is a job queue whose jobs live in your application's own
SQL database (PostgreSQL; SQLite as the embedded default; MySQL or MariaDB) and are owned
by workers through leases.

# Leases

A worker takes a job with one atomic conditional statement (on Postgres a
batch claim with FOR UPDATE SKIP LOCKED in a materialized CTE; on SQLite a
single-writer BEGIN IMMEDIATE transaction), never a read followed by a write.
The claim sets the job running, records the claiming client in lease_owner
("host:pid:client-id"), adds one to the job's attempt count, sets
lease_until from the database clock, and issues a fencing token: the job's
lease_token, which grows by one with every grant of that job.

While the handler runs, the client renews its leases in batched statements:
each lease between a sixth and a third of its TTL after its last renewal, all
the leases that are due together in one statement (default TTL 30 s; per kind
with WorkerOpts.LeaseTTL, per job with InsertOpts.LeaseTTL). Renewals change no
indexed column, so Postgres applies them as HOT updates.

Every write that ends or extends a lease (heartbeat, completion, failure,
snooze, release, CompleteTx) is a conditional write that checks the token,
that lease_owner is the writing client's, that the job is running, and that
the lease has not expired on the database clock. A worker that lost its lease
(it was paused past the TTL, partitioned, or the job was reclaimed) writes
nothing and gets a *LeaseLostError.

The owner is checked because a token alone does not survive a failover with
asynchronous replication: the new primary may lack the last claims the old
one made, and then issues the same token numbers again to whichever clients
claim next, while the clients that held them still run. Each client's owner
is its own ("host:pid:random" for the life of the client), so a database
that forgot a claim can give its token number to another client but not
that client's owner, and the stale holder's writes are refused. When it
gives the job back to the same client, with the same token, that client
sees it already holds the job: the older handler's context is cancelled
with a *LeaseLostError and nothing of that lease is written (its CompleteTx
is refused by its lease time), so the job still runs to one outcome.

The client also keeps a local deadline per lease on the monotonic clock:
the time the claim or the last successful renewal was sent, plus 90% of the
TTL. The database computed the real expiry at or after that moment, so the
local deadline is never later than the real one. When a renewal is refused,
or the database cannot be reached before the local deadline, the handler's
context is cancelled and context.Cause(ctx) is a *LeaseLostError. A handler
must stop making outside effects when its context is done.

The expirer (the stuck watcher of the lease pattern; it mostly makes jobs
available again) runs on every client (its writes are conditional, so
running it everywhere is safe) once a second by default
(Config.WatcherInterval). It reclaims jobs whose lease
expired on the database clock: under the retry policy (the default) the job
is available again at once; under the stuck policy (WorkerOpts.ExpiryPolicy)
it moves to the stuck state and waits for reconciliation (ResolveStuck),
because its handler may already have had an outside effect, such as a card
charge. The policy in force is the one of the worker that claimed the job.
A lease expiry is counted in the job's Expiries, not its Errors: a crash is
not a handler error and does not use up MaxAttempts. After MaxExpiries
expiries (default 5) a job moves to stuck even under the retry policy, so a
job that kills its worker every time does not loop forever. A crashed
worker's job is running again within its TTL plus WatcherInterval.

Each lease that ends is recorded once in the attempt history
(leasehold_attempt): attempt, token, owner, leased at, lease until, last
heartbeat, heartbeat count, finished at, outcome (completed, failed,
panicked, lease_expired, released, cancelled, snoozed) and error, in the same
statement or transaction as the job's state change. Read it with
JobAttempts or plain SQL. On SQLite and MySQL it is a table with a row per
lease. On Postgres (schema version 12) it is a view: the lease that
completes a job stays in the job's row, which already holds its owner,
token, window and heartbeats (marked completion_in_row), and every other
lease has a row in leasehold_attempt_log; triggers copy a held lease into
the log in the statement that retries, changes or deletes its job row. So a
completion writes one row, not two.

Outcomes are written in batches: whatever ended while the previous batch was
being written goes in the next statement, one statement at a time unless a
full batch (Config.CompleterMaxBatch) waits. On Postgres a batch of a queue
with a backlog carries that queue's next claim, sized to the workers the
batch frees, in the same round trip and transaction. A job's worker slot
frees only once its outcome has committed, so MaxWorkers bounds the jobs
whose outcome is not yet durable as well as the handlers running. A handler
that returns nil after CompleteTx has nothing left to write: its slot frees
when it returns (see Guarantees).

# Guarantees

  - At-least-once execution: a job inserted (and, for InsertTx, committed) is
    run until it is completed, discarded, cancelled or stuck. A handler may
    run more than once for one job: after a crash, a lost lease, or an error.
  - At most one holder: at any moment at most one lease on a job is valid,
    and only the holder of the current token can write its outcome.
  - At most one fenced completion per lease: a job is completed by exactly one
    lease, and no write from an older lease lands after a newer one was granted.
  - Effectively-once business effects with CompleteTx: a handler that writes
    its business effect and calls CompleteTx in one transaction commits both
    or neither, and only while it holds the lease. Retries see the effect.
    The completion locks the job's row until the transaction ends, so a
    commit that lands after the lease's expiry lands only while that lock
    kept every other holder (and the expirer) out: nothing runs the job in
    between. The client writes no outcome of its own for a handler that
    returns nil after a successful CompleteTx, and its worker slot frees at
    once; the client confirms the commit instead by reading the attempt
    history, in one statement for many CompleteTx jobs, and only then
    counts the job
    completed (Stats.Completed) and sends its event: under load up to
    50 ms after the commit. On Postgres (driver.AttemptsClaimer) that read
    rides along the queue's next claim, in its round trip and transaction;
    otherwise, or when no claim comes, it is a read of its own, sent once
    64 confirmations wait or the oldest has waited 50 ms, or at once when
    the client runs nothing else. A CompleteTx whose transaction rolled back while
    the handler returned nil is found missing there, and the job is
    written as failed with that reason and retried under its retry policy
    (its lease is still the client's: the completion never landed). The
    transaction is bounded: on Postgres (driver.TxBounder)
    CompleteTx sets the server's idle-in-transaction, statement and (17+)
    transaction timeouts, for that transaction only, to the time left
    before the lease's local deadline (at least 100 ms), so a handler that
    stalls before COMMIT has its transaction aborted by the server and the
    job is reclaimed when the lease expires; on every backend, a handler
    still stalled there once the lease has run out has its context
    cancelled, which rolls back a database/sql transaction begun with that
    context (MySQL, MariaDB, SQLite). Not bounded there: a transaction begun
    with another context, or a process that is frozen (MySQL has no
    idle-in-transaction timeout; its wait_timeout, 8 hours by default,
    ends an idle connection; MariaDB's idle_transaction_timeout can be set
    server-wide), and on SQLite such a transaction holds the write lock of
    the whole database. A commit whose result the client could not see (the
    connection dropped during COMMIT, or the handler returned an error after
    its transaction committed) is read back from the attempt history and
    counted as the outcome it was (Stats.AmbiguousCommits), not as a lost
    lease.
  - Failover: a stale holder is refused even when a rolled-back database
    issued its token number again (see Leases). What a failover with
    asynchronous replication can lose is what the new primary never
    received: a job inserted, or an outcome (completion, CompleteTx
    transaction) acknowledged, shortly before the failover may be missing
    afterwards, and then that job runs again (its earlier run's outside
    effects must be idempotent, as for any retry), or the insert must be
    retried by the application. Synchronous replication loses nothing
    acknowledged.
  - Outside effects (a payment provider's API) cannot be in the transaction.
    Make them idempotent with a key that is the same for every attempt of a
    job: Job.IdempotencyKey (the job's unique key if it has one, else its kind
    and ID). Use the stuck expiry policy where a blind retry would be unsafe.
  - Not guaranteed: exactly-once handler execution; ordering beyond
    priority, then scheduled time, then ID, and that only among claims (a
    job a working client inserts leased to itself starts at once; see
    Claim order below); and anything after the lease's
    local deadline: a handler that ignores its cancelled context may still be
    running while another worker holds the job, and only its database writes
    are fenced.

# Job states

	    insert                          insert (ScheduledAt in future)
	      |                                       |
	      v          ScheduledAt passes           v
	+-----------+ <------------------------- +-----------+
	| available |                            | scheduled | <--- Snooze
	+-----------+ <------------+             +-----------+
	      | claim              | retry at ScheduledAt / release /
	      v                    | lease expired (retry policy)
	+-----------+ -------------+
	|  running  | --- error, attempts left ---> retryable --+
	+-----------+                                           |
	 |   |   |  \___ lease expired (stuck policy) ---> stuck --- ResolveStuck
	 |   |   |                                              (succeeded, failed, retry)
	 |   |   +-- Cancel --------------> cancelled
	 |   +------ Permanent / attempts exhausted / bad args --> discarded
	 +---------- nil ------------------> completed

Scheduled and retryable jobs are claimed once their ScheduledAt passes; the
state becomes running at the claim. Completed, discarded and cancelled are
final until an operator retries the job (JobRetry). Stuck jobs wait for
ResolveStuck or an operator. A job inserted with dependencies
(InsertOpts.DependsOn) starts pending and becomes available as described
under Dependencies.

# Stages

A handler whose work has stages (authorize, capture, ledger) records each
with Checkpoint, or CheckpointTx inside its own business transaction: one
conditional write fenced by the lease's token and owner, which stores the
stage and a small JSON state on the job row (JobRow.Stage, StageState; at
most MaxStageStateBytes), appends it to the stage history (JobStages) and
renews the lease as a heartbeat. A holder that lost its lease gets a
*LeaseLostError and nothing is written. The next attempt, after a crash,
an error or an expiry, sees the stage and its state; Stages runs a
declared sequence of stages and skips those already recorded. This is not
replay: code outside the stages runs on every attempt, and a stage
interrupted before its checkpoint runs again.

# Dependencies

InsertOpts.DependsOn names jobs that must complete first (DependsOnIndex,
earlier jobs of the same InsertMany call). Such a job is inserted pending
and becomes available in the very statement that completes its last
dependency, whichever client writes it — no sweep polls for it. When a
dependency is discarded or cancelled, DependencyCancel (the default)
cancels the job, and transitively the jobs waiting on it, with LastError
naming the dependency; DependencyWait keeps it pending; retrying the
dependency lets either continue. Dependencies are fixed at insert and
name jobs that exist or come earlier in the call, so every edge runs from
an older job to a newer one and a cycle cannot be formed. InsertBatch
inserts members and a callback that runs once after all of them finished,
whatever their outcome (DependencyAny), with their counts in its args
(BatchOutcome).

# Graphs

NewGraph and Graph.Add build a graph of named steps, each with its parents
(steps added before it, so no cycle can be built); InsertGraph (or
InsertGraphTx, in the caller's transaction) inserts it in one transaction:
the first step, whose job ID becomes the graph's ID, then the others, each
pending on its parents. Every step carries its graph ID and step name in
its metadata under "leasehold_graph" (GraphNodeOf reads them) — no schema
of its own. Graph lists a graph's steps and edges, JobLineage a job's
ancestors and descendants (both walk the edges job by job, for operators);
GraphCancel cancels every unfinished step, last first, with LastError
naming the graph, and asks running ones to stop as JobCancel does. The CLI
prints a lineage (leasehold jobs graph ID); the dashboard draws it on the
job page and a whole graph at /graphs/{id}.

# Operator actions and the audit trail

JobRetry, JobCancel, JobDiscard, ResolveStuck (and ResolveStuckTx),
QueuePause, QueueResume and JobBulk record an entry in the audit trail
(table leasehold_audit) in the transaction of the change itself, so the
change and its entry commit together or not at all: who acted, the action,
the job or queue, the database clock, the note, and how many jobs it
changed (0 when refused: the job was in a state the action does not apply
to). Who is the identity in the context: leasehold.WithActor(ctx,
"cli:alice@host"); the dashboard passes how the request authenticated
("token", "basic:<user>", "session"), the CLI "cli:$USER@hostname", and a
context without one is recorded as UnknownActor. AuditList reads the trail,
newest first, by job, queue, actor or time.

JobBulk applies an action (BulkRetry, BulkDiscard, BulkCancel, BulkDelete)
to every job matching states, queue, kind and age, in batches of
BulkParams.BatchSize (1,000) jobs, each one statement in its own
transaction with one audit entry listing the jobs it changed: a huge set
never holds its locks for long. Count first with JobBulkCount. Running jobs
are never retried, discarded or deleted; BulkCancel asks them to stop as
JobCancel does. A retry that would give a job a unique key another job
holds skips it and reports it in BulkResult.Conflicts.

# The client registry

Every started client keeps a row in the client registry (table
leasehold_client): its lease owner, host, PID, Config.ID, the leasehold
version it was built with, its queues and how many leases it holds. It
upserts the row as soon as Start returns (in the background, so that a busy
pool does not hold up Start) and then every Config.RegistryInterval (5 s)
on the ordinary executor, off the job path, and deletes it in Stop. A row
counts as alive for three intervals after its last beat; the row of a
client that died without Stop is then shown as gone, and any working client
deletes it a LeaseTTL later (all on the database clock). Clients reads the
registry: the fleet view of the dashboard's Clients page, `leasehold
clients` and leaseholdprom's leasehold_clients_alive.

# Claim order

Jobs are claimed in order of priority, then ScheduledAt, then ID. A client
working through a backlog continues each claim where its previous full claim
ended, and starts again from the head after a claim that was not full and at
least once per PollInterval. A job that becomes claimable behind a client's
position is claimed by the inserting client's next claim (the insert sends
it back to the head), and by the other clients at their next claim when it
has a higher priority than their position (on Postgres, where inserts
notify) and otherwise, as for a job inserted by another client with a
ScheduledAt in the past, within their PollInterval while their backlog
lasts. On Postgres, a client does not claim again for the notification of
its own insert: it has woken its workers itself.

A client inserting on its own (Insert, InsertMany; not the Tx methods, not
InsertManyFast) into a queue it works inserts the jobs already leased to
itself, when that queue has no fleet-wide limits, no backlog is waiting and
workers are free: up to one job per free worker, without a schedule or
dependencies, go in running (attempt 1, fencing token 1, the lease on the
database clock, as a claim leases them) unless the queue is paused, and
start when the insert returns, without a wake-up or a claim. The
InsertResult's Job is then the running row. Such a job may start before
older claimable jobs of its queue, which the client's claims take at the
same time, its workers being free; claim order governs claims, not these
inserts. A job inserted while the workers are busy goes in available, and
the first of them to end wakes the claim loop (backlog or not). Kinds with
the stuck expiry policy are never leased on insert. An insert whose result
is lost as it commits (its context cancelled, its connection gone) leaves
its leased jobs to the expirer, as a claim lost the same way does: they
run once their leases expire, counted as one expiry each.

# Unique jobs

InsertOpts.UniqueKey is an idempotency key. While a job with the key is
available, scheduled, running, retryable or stuck, inserting another with the
same key inserts nothing and returns the existing job with UniqueSkipped set.
A unique index enforces this, so it holds under concurrent inserts in any
number of processes. Once the job is completed, discarded or cancelled the
key is free again — unless InsertOpts.UniqueOpts.ByState names that state.

InsertOpts.UniqueOpts derives the key from what the job is: its kind always,
plus its encoded args (ByArgs), its queue (ByQueue), and the period it falls
in (ByPeriod: ScheduledAt, else the inserting client's clock, truncated to
the period from the Unix epoch). The same index enforces it, so the same
guarantee holds. ByState adds finished states (completed, discarded,
cancelled) that keep holding the key, recorded with each job: a job
inserted with ByState [completed] blocks its key after it completes, until
retention deletes it. Not guaranteed: uniqueness of jobs inserted with
different UniqueOpts, or of args that encode differently (a map is encoded
with sorted keys, a struct in field order).

# Cancelling a running job

JobCancel on a running job records a cancellation request in the job's row.
The client holding the lease polls for requests every CancelCheckInterval
(250 ms by default, on every backend) and cancels the handler's context
with cause ErrJobCancelled. The attempt is recorded as cancelled and the job
never runs again: the database turns any retry, snooze or release of a job
with a request into cancelled, and an expired lease of such a job too (a
crashed holder). A handler that returns nil (the work was done) completes
the job, and Permanent discards it: those outcomes stand.

# Fleet-wide limits

QueueConfig.GlobalLimit bounds the running jobs of a queue across every
client; WorkerOpts.GlobalLimit bounds a kind across every client and
queue; QueueConfig.RateLimit bounds the jobs of a queue started per period.
A client that has any of them claims in a short transaction: it locks the
limit rows (queue, then kinds in name order), counts the running jobs,
claims only what fits, records the rate window, and commits. The next
claimer's count runs after that commit, so the limit is never exceeded,
whatever the number of clients: neither by handlers nor by running jobs
with live leases on the database clock. A running job holds its slot until
its lease is reclaimed, not merely until the lease's expiry time: a
renewal that checked the lease just before it expired may commit after
the count and make it live again. So a claim that counts expired leases
reclaims them first, in its own transaction, as the watcher would (the job
becomes available, or stuck, with a lease_expired attempt); the renewal
then finds the lease gone, and the slot is free in that same claim. A
lease whose row another transaction holds (that renewal, or an outcome)
keeps its slot until the next claim. So a crashed worker holds no slot
once its lease runs out (its handler, cancelled at the local deadline,
has stopped by then if it honours its context). Rate windows are fixed and aligned to the epoch
on the database clock: at most Limit starts per window, so at most 2×Limit
in any span of one Period. Each client enforces the limits it is
configured with; configure the same values everywhere. Limited claims cost
a few statements and serialise on the limit row; unlimited queues keep the
single-statement claim.

# Per-key flow control

A job may carry a key (InsertOpts.Key, or derived from its args by the
kind's WorkerOpts.KeyBy JSON paths at insert) and a sequence
(InsertOpts.Sequence, WorkerOpts.SequenceBy), stored in the job's
flow_key and sequence_key columns. A queue whose client sets any key
option (QueueConfig.KeyLimit, KeyRateLimit, Fair, Sequenced, or a worker's
KeyLimit, SequenceBy or SequencePolicy) is claimed by the keyed claim, in
the limited claim's transaction described above: the queue's limit row is
locked (and the kind's, for a kind's KeyLimit), then the claim ranks
claimable jobs within their key, counts each key's running jobs and its
starts in the current rate window, and leases
only the jobs that fit (one statement on Postgres, a few on SQLite and
MySQL/MariaDB). It ranks only the keys it visits: it walks the queue's
keys in key order, starting after the last key the queue's previous
keyed claim visited (the kind's, for the claim of a kind with a limit of
its own) and wrapping round, until it has found as many keys with a free
slot and a claimable job as the claim may take (or has visited every
key, or that many plus 256), and reads each such key's first jobs. On
Postgres the keys are the rows of table leasehold_queue_key, one per
queue and key of a job not completed, kept by triggers on the job table;
the maintenance leader deletes the keys whose jobs have all completed,
checking 5,000 keys every 2 seconds, as a key still in the table costs
every walk that passes it its counts; a key whose slots are taken costs
its counts, not a read of its jobs. On SQLite and MySQL/MariaDB the walk
is a skip scan of an index of the claimable jobs by key (on MySQL/MariaDB
a batch of keys per statement): a key with no claimable job costs
nothing, a full one its counts and a probe for its first job. Jobs
without a key are read in claim order as one more group. What it
guarantees, on the database clock, for clients configured alike:

  - KeyLimit: at most N running jobs with one key in the queue
    (QueueConfig.KeyLimit) or of the kind in every queue
    (WorkerOpts.KeyLimit); both hold when both are set, and with
    GlobalLimit. A job whose key is full is skipped, not claimed and
    released. A running job holds its key's slot until its lease is
    reclaimed, for the reason given above: after a crash, the watcher
    frees it within WatcherInterval of the lease's expiry (the keyed claim
    does not reclaim leases itself). Jobs without a key are not
    key-limited.
  - KeyRateLimit: at most Limit starts per key per fixed, epoch-aligned
    window of Period (so at most 2×Limit in any span of one Period). A
    retry counts as a start. The counts live in leasehold_key_window, one
    row per key that started a job in its latest window; the maintenance
    pruner deletes the rows whose window ended.
  - Fairness (Fair, implied by the key limits): each claim orders the
    jobs by their rank within their key (priority, ScheduledAt, ID) plus
    the key's running jobs in the queue, then by priority, ScheduledAt and
    ID. So within a claim every key's first waiting job comes before any
    key's second, and a key with jobs running ranks behind a key with none:
    one key's backlog cannot starve the others. Priority orders jobs only
    within a key and among jobs of equal rank; jobs without a key form one
    group. All of this holds among the keys the claim visited
    (above), not the whole queue: the walk goes round every key
    with claimable jobs in turn across claims, so every key is visited
    once per round of the walk however large the other keys' backlogs,
    and a visited key gets a job in that claim unless the claim fills with
    jobs that rank before it (of keys with fewer running jobs, or jobs
    without a key). A job's priority does not bring its key into a claim
    ahead of its turn: priority orders jobs within a key and within a
    claim. Not guaranteed: weights per key, or strict rotation when keys
    tie (the oldest job wins a tie, so a key with a backlog keeps about one
    job running while the others share the rest).
  - Sequences: a job with a sequence starts only while no other job of
    its sequence runs and every job of the sequence with a smaller ID is
    completed (or gone, pruned or deleted). A retried or expired head stays
    unfinished, so the sequence waits for it, across crashes. A discarded
    or cancelled predecessor blocks the sequence until an operator retries
    or deletes it, unless the waiting job's kind has SequencePolicy
    SequenceContinue; a stuck one blocks under either policy.
    Client.SequencesBlocked lists blocked sequences. Insert order is ID
    order: jobs of one sequence inserted one after another keep their
    order, but two inserts of one sequence in concurrent transactions are
    ordered by the IDs they drew, and the later ID may commit and run
    first. Sequences are kept only by the keyed claim: a client that claims
    the queue with the plain claim (no key option on the queue) ignores
    them.

KeyBy and SequenceBy apply on clients that have the kind's worker
registered; an insert whose args lack a value at a path, or hold null, an
object or an array there, fails with ErrInvalidArgs. Keys are at most 256
bytes. On SQLite and MySQL/MariaDB the keyed claim reads every claimable
job of the queue to rank it, so its cost grows with the backlog; on
Postgres it grows with the keys it visits (those at their limit among
them) and the jobs it takes, not with the backlog. Unkeyed queues keep the
single-statement claim unchanged.

Client.KeyStats (`leasehold keys`, the dashboard's Keys page) reports the
keys with the most waiting jobs with their running jobs, and per queue the
distinct keys waiting and how the waiting jobs spread over them;
leaseholdprom exports that summary per queue, never one series per key.

# Periodic jobs and leaders

Config.PeriodicJobs are enqueued on cron or interval schedules (package
cron), once per slot in the whole fleet. The schedule's next slot is stored
in leasehold_periodic, so a restart never skips one. Clients with periodic
jobs elect a leader through a lease row (leasehold_leader) with a fencing
token; the leader inserts the slot's job (unique key
"periodic:<name>:<slot>") and advances the stored slot in one transaction,
and the advance is a conditional write on the previous slot and on the
leader's token and unexpired lease. Two clients can therefore never enqueue
the same slot, even when a paused leader wakes up after a new one took
over. A dead leader is replaced within about 7/6 of Config.LeaderTTL (15 s
by default); slots that pass meanwhile follow the schedule's MissedRunPolicy:
CatchUpOnce runs one job for them (metadata periodic_missed counts them),
SkipMissed skips them. Job dependencies (a job waiting for others) are out
of scope.

# Retention

The maintenance leader (another lease row, among all started clients)
deletes completed jobs after Config.Retention.Completed (24 h by default),
cancelled and discarded jobs after 7 days, and attempt rows after 30 days,
in batches of 1,000. A negative duration keeps rows forever. Stuck, waiting
and running jobs are never deleted. The attempt history is kept apart from
the jobs, on its own retention. On Postgres a completed job's last lease,
held in its row, is kept as long as the job and then goes into the
attempt log, where attempt retention applies from its finish time: set
attempt retention shorter than Completed and that lease still lives as long
as its job.

# Observing jobs

Client.Subscribe returns a channel of this client's events: a job it ran
completed (also by CompleteTx), failed and will retry, was discarded,
cancelled or snoozed; a lease it held was lost; an expired lease (any
client's) was reclaimed by its watcher. Each event is sent once what it
reports has committed, never for a write the database refused (that is a
lease-lost event), and carries the job as the client knows it after the
outcome. Delivery is best effort: a subscription's channel is bounded
(1,000 by default, SubscribeConfig.ChanSize), the job path never waits for
a subscriber, and an event that finds the channel full is dropped and
counted in Stats.EventsDropped. Subscriptions last across Stop and Start.
The events are of one client, not of the fleet: JobGet and JobList read
any job, whoever runs it.

# Transactions

InsertTx inserts inside the caller's transaction (pgx.Tx with package
postgres, *sql.Tx with package sqlite): the job exists, and can be claimed,
only if the transaction commits. CompleteTx completes a job inside the
caller's transaction, fenced by its token and owner and bounded by its lease
(see Guarantees).

# Connections

A handler's own transactions (CompleteTx, InsertTx, any business write)
draw on the pool you gave the driver, and so do inserts, reads and operator
actions. The lease machinery does not: from Start to Stop each working
client reserves connections that handlers cannot take (Config.ReservedConns;
driver.Reserver) and runs on them its claims, lease renewals, outcome
writes, expiries and the cancellation poll, so handlers holding every
connection of the pool delay their own work but not a renewal, and a
healthy job does not lose its lease for want of a connection. Package
postgres opens a small pool of its own from your pool's configuration (3
connections by default); packages mysql and sqlite pin connections of your
*sql.DB (2 by default), which count against its SetMaxOpenConns. Size your
pool for the handlers that open transactions at once, plus what inserts and
reads need; see package postgres for the numbers. SQLite has one writer: a
handler holding a write transaction delays every writer, renewals included,
until it ends, whatever is reserved.

# Backends

Package postgres uses pgx v5 and wakes workers with LISTEN/NOTIFY (polling
remains the fallback). Package sqlite uses the pure-Go modernc.org/sqlite in
WAL mode with synchronous=FULL and a busy timeout. Package mysql serves MySQL
8 and MariaDB 10.6+ (claims with SELECT ... FOR UPDATE SKIP LOCKED in a short
transaction, since neither has UPDATE ... RETURNING). Neither SQLite nor MySQL
can push a notification: an insert there bumps a wake-up row of its queue in
its own transaction, and each listening client reads those rows every few
milliseconds (on SQLite only when PRAGMA data_version says another
connection committed), so jobs inserted by another process start within
milliseconds too. On every backend, jobs that become available because their
schedule arrives are found by polling (Config.PollInterval).
All three pass the conformance suite in package driver/drivertest. Migrations are numbered SQL files in each
backend's migrations folder, applied with package migrate or your own tool.

# Upgrading

Every replica of a rolling deploy may run `leasehold migrate up` (or
migrate.Migrator.Up) at once, before it starts its workers: each run takes
the database's migration lock first (on Postgres a transaction-scoped
advisory lock keyed on the schema, which works through PgBouncer in
transaction mode; GET_LOCK on MySQL and MariaDB; the write lock on SQLite)
and reads the applied migrations only once it holds it. One replica
migrates; the others wait (10 minutes at most by default:
migrate.Config.LockTimeout, --lock-timeout), find nothing left, print
"nothing to do" and exit 0. On Postgres and SQLite a run is one
transaction: a migration that fails is undone alone and the ones before it
are kept, and when the final commit fails nothing of the run is. On MySQL
each migration commits as it runs.

Client.Start checks the schema before it claims anything, with one query:

  - Older than the binary needs (a migration of its driver is not
    applied): Start returns a *SchemaVersionError matching ErrSchemaOutdated,
    "leasehold: schema at version 3, this binary needs 4: run `leasehold
    migrate up`". A new binary deployed before its migrations ran therefore
    stops at once instead of failing on its first claim.
  - Newer than the binary knows (a newer binary migrated): allowed only
    when every migration it does not know is declared compatible with it;
    Start then logs a warning and runs. Otherwise it returns an error
    matching ErrSchemaTooNew that names the migration.

A migration declares compatibility with a header line among the leading
comments of its up file, "-- leasehold:compatible-with N": binaries that
know version N or later keep working once it is applied (a nullable column
or an index old code never reads can declare the version before it; a
change old queries would trip on must not). The migrator records the
declaration in leasehold_migration with the migration, so an old binary,
which has never seen the file, can read it. Migrations without the header
require a binary that knows them: upgrade by
running the new binary's `migrate up`, then replacing the old replicas;
old replicas that restart in between refuse to start with ErrSchemaTooNew
rather than run against a schema they do not know. `leasehold migrate
status` lists the migrations, those the binary does not know, and each
one's declaration.

Insert-only clients never call Start: call Client.CheckSchema at boot to
apply the same check. A database whose tables were created by another
migration tool from the .sql files has no leasehold_migration bookkeeping;
Start then logs a warning and does not check.
*/
package leasehold
