// Package driver is the contract between the leasehold client and a database
// backend. It imports no database library: each backend (package postgres,
// package sqlite) implements it, and the conformance suite in
// driver/drivertest specifies its behaviour once for all of them.
//
// Every lease-bearing write a driver performs is a single conditional write:
// the row changes only while the caller's fencing token is the job's current
// token, the caller's owner is the job's lease owner, the job is running, and
// its lease has not expired on the database clock. The owner is what a
// database rolled back by a failover cannot hand to another client: it may
// issue a token number again, but each claiming client has an owner of its
// own. All lease arithmetic uses the database clock, never the caller's.
package driver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// ErrNotFound is returned by single-row reads and updates when no row has the
// given identifier.
var ErrNotFound = errors.New("leasehold/driver: row not found")

// ErrClosed is returned by an executor whose transaction has ended.
var ErrClosed = errors.New("leasehold/driver: transaction closed")

// ErrUniqueConflict is wrapped by JobSetState when the new state would make
// the job hold its unique key while another job holds it (retrying a
// cancelled job whose key a newer job has taken). Nothing is changed.
var ErrUniqueConflict = errors.New("leasehold/driver: unique key held by another job")

// Driver is a database backend. TTx is the backend's transaction type
// (pgx.Tx, *sql.Tx) that users pass to the transactional client methods.
type Driver[TTx any] interface {
	// Name is a short lowercase name: "postgres", "sqlite".
	Name() string
	// GetExecutor returns an executor on the driver's pool. Each of its write
	// methods is atomic on its own.
	GetExecutor() Executor
	// UnwrapExecutor returns an executor that runs inside the caller's
	// transaction. It never commits or rolls back.
	UnwrapExecutor(tx TTx) Executor
	// Migrations returns the backend's schema migrations in version order.
	Migrations() []Migration
}

// Migration is one numbered schema change, as plain SQL.
type Migration struct {
	// Version is the migration's number, starting at 1.
	Version int
	// Name describes it ("create_job_table").
	Name string
	// Up applies it.
	Up string
	// Down reverts it.
	Down string
}

// Executor runs the queue's statements, either on a pool or inside a
// transaction.
type Executor interface {
	// Begin starts a transaction (a nested one, as a savepoint, when the
	// executor is already inside one). On SQLite the transaction takes the
	// write lock at once (BEGIN IMMEDIATE).
	Begin(ctx context.Context) (ExecutorTx, error)
	// Exec runs SQL that returns no rows, possibly several statements.
	Exec(ctx context.Context, sql string) error
	// Now returns the database clock.
	Now(ctx context.Context) (time.Time, error)

	// JobInsertMany inserts jobs and returns them in input order. A job with a
	// unique key is not inserted when a job holding the same key exists — one
	// in a state other than completed, discarded or cancelled, or in one of
	// those whose bit its UniqueFinished recorded; that job is returned
	// instead, with UniqueSkipped set. This holds under concurrent inserts
	// (a unique index, not a read-then-write). A job whose ScheduledAt is in
	// the future on the database clock is inserted as scheduled, others as
	// available. Drivers that implement Notifier notify each queue that got an
	// available job (delivered at commit), and report to SenderTracker as
	// SenderTracker documents. A driver may coalesce the notifications of the
	// inserts it commits itself (outside a caller's transaction): one
	// notification, sent after those inserts committed and within a short
	// window of them, then announces several. Inserts in a caller's
	// transaction notify at that transaction's commit.
	JobInsertMany(ctx context.Context, params *JobInsertManyParams) ([]*JobInsertResult, error)
	// JobInsertFast inserts jobs in bulk (COPY on Postgres) and returns the
	// count. It does not take jobs with unique keys. Notifications and
	// SenderTracker are as for JobInsertMany.
	JobInsertFast(ctx context.Context, params *JobInsertFastParams) (int, error)

	// JobClaim leases up to Max claimable jobs of a queue in one atomic
	// statement and returns them ordered by priority, scheduled time and ID.
	// Claimable: state available, scheduled or retryable with ScheduledAt not
	// after the database clock, not locked by a concurrent claimer. Each
	// claimed job becomes running; its Attempt and LeaseToken grow by one;
	// LeaseOwner is set; LeasedAt is now and LeaseUntil now plus its TTL (the
	// job's own LeaseTTL, else KindLeaseTTL[kind], else DefaultLeaseTTL);
	// heartbeat fields are reset; ExpiryPolicy is ExpiryStuck for StuckKinds
	// and ExpiryRetry otherwise.
	JobClaim(ctx context.Context, params *JobClaimParams) ([]*leasetype.JobRow, error)
	// JobHeartbeat renews leases in one statement: each job whose token and
	// lease owner match, that is running and whose lease has not expired gets
	// LeaseUntil = now + TTL, HeartbeatAt = now and Heartbeats + 1. It returns
	// the IDs renewed; a job missing from the result has lost its lease. It
	// touches no indexed column.
	JobHeartbeat(ctx context.Context, params *JobHeartbeatParams) ([]int64, error)
	// JobFinish ends leases. For each item whose token and lease owner
	// match, that is running and whose lease has not expired, it sets the new
	// state and appends the attempt row, atomically. It returns the IDs
	// written; an item missing from the result wrote nothing (its lease was
	// lost). In a caller's transaction (UnwrapExecutor) with TxBound set, a
	// driver that implements TxBounder first bounds that transaction.
	JobFinish(ctx context.Context, params *JobFinishParams) ([]int64, error)
	// JobExpire reclaims up to Limit running jobs whose lease expired on the
	// database clock. Each one's Expiries grows by one; it becomes stuck when
	// its ExpiryPolicy is stuck or Expiries reaches MaxExpiries (when > 0),
	// else available with ScheduledAt now; an attempt row with outcome
	// lease_expired is appended. Safe to run concurrently from many clients.
	// Returns the rows after the change.
	JobExpire(ctx context.Context, params *JobExpireParams) ([]*leasetype.JobRow, error)

	// JobGet returns the job ID or ErrNotFound.
	JobGet(ctx context.Context, params *JobGetParams) (*leasetype.JobRow, error)
	// JobList returns jobs matching the filter, newest ID first.
	JobList(ctx context.Context, params *JobListParams) ([]*leasetype.JobRow, error)
	// JobAttempts returns the attempt history of job JobID, oldest first,
	// or with Leases the attempt rows of those leases (see
	// JobAttemptsParams), in one statement either way.
	JobAttempts(ctx context.Context, params *JobAttemptsParams) ([]*leasetype.AttemptRow, error)
	// JobSetState moves a job that is not running from one of FromStates to
	// State (an operator action: retry, cancel, discard, resolve). It returns
	// the row after the call and whether it changed; ErrNotFound when the ID
	// does not exist; an error wrapping ErrUniqueConflict when the job would
	// hold a unique key that another job holds.
	JobSetState(ctx context.Context, params *JobSetStateParams) (*leasetype.JobRow, bool, error)
	// JobCountByState counts jobs per queue and state.
	JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error)
	// JobThroughput counts the attempts that ended at or after Since, per
	// queue, minute (truncated, UTC) and outcome, oldest minute first.
	JobThroughput(ctx context.Context, params *JobThroughputParams) ([]*leasetype.ThroughputCount, error)
	// QueueBacklog returns, for each queue with claimable jobs now (available,
	// scheduled or retryable and due on the database clock), how many there
	// are and the age of the oldest, measured from its ScheduledAt on the
	// database clock. Queues are in name order.
	QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error)

	// QueueSetPaused pauses (paused) or resumes a queue for every client:
	// from the commit on, JobClaim takes nothing from a paused queue. Jobs
	// already running are not affected. Resuming wakes listeners (Notifier)
	// as an insert would. A queue need not exist to be paused.
	QueueSetPaused(ctx context.Context, params *QueueSetPausedParams) error
	// QueueList returns the queues that have a control row (paused now or
	// before), in name order.
	QueueList(ctx context.Context) ([]*QueueRow, error)

	// JobCountRunning counts running jobs: those of Queue (all kinds) and,
	// for each of Kinds, those of that kind (all queues); apart, those whose
	// lease has not expired on the database clock and those whose lease has
	// (which no JobExpire has reclaimed yet). One statement: the counts come
	// from one read.
	JobCountRunning(ctx context.Context, params *JobCountRunningParams) (*RunningCount, error)
	// LimitLock creates the limit rows of Keys that are missing and locks
	// them, in the order given, until the caller's transaction ends (SELECT
	// ... FOR UPDATE; on SQLite the write lock already serialises). It must
	// run on an executor from Begin. It returns the rows in the order of
	// Keys, with the database clock read after the locks were taken.
	LimitLock(ctx context.Context, params *LimitLockParams) ([]*LimitRow, error)
	// LimitSetWindow records a limit row's rate window.
	LimitSetWindow(ctx context.Context, params *LimitSetWindowParams) error

	// JobCancelRunning asks for cancellation of running job ID: it sets
	// CancelRequestedAt to the database clock (kept when already set) and
	// reports whether the job was running. A job in another state is not
	// changed. ErrNotFound when the ID does not exist.
	//
	// From then on the job never runs again: JobFinish turns a retryable,
	// available or scheduled outcome into cancelled (attempt outcome
	// cancelled), JobExpire turns an expired lease into cancelled (attempt
	// outcome lease_expired). A completed or discarded outcome stands.
	JobCancelRunning(ctx context.Context, params *JobCancelRunningParams) (*leasetype.JobRow, bool, error)
	// JobCancelRequested returns the running jobs leased by Owner whose
	// cancellation was asked for. It reads a small partial index.
	JobCancelRequested(ctx context.Context, params *JobCancelRequestedParams) ([]LeaseRef, error)

	// JobPrune deletes up to Limit jobs in one of States whose FinalizedAt is
	// more than OlderThan before the database clock, and returns how many.
	// Attempt rows are kept (AttemptPrune has its own retention).
	JobPrune(ctx context.Context, params *JobPruneParams) (int64, error)
	// AttemptPrune deletes up to Limit attempt rows that finished more than
	// OlderThan before the database clock, and returns how many.
	AttemptPrune(ctx context.Context, params *AttemptPruneParams) (int64, error)

	// LeaderAttempt acquires or renews the leader lease Name in one
	// conditional write and returns the holder after the call. The lease is
	// taken when no row exists or its lease expired on the database clock
	// (Token grows by one, AcquiredAt is now); it is renewed when Owner holds
	// it with Token and it has not expired. LeaseUntil becomes now + TTL in
	// both cases. Otherwise nothing changes: the caller compares the returned
	// Owner and Token with its own.
	LeaderAttempt(ctx context.Context, params *LeaderParams) (*LeaderRow, error)
	// LeaderResign ends the lease Name at once when Owner holds it with Token.
	LeaderResign(ctx context.Context, params *LeaderParams) error

	// PeriodicEnsure inserts the schedule row Name with NextRunAt when it is
	// missing; when it exists with another Spec, it sets Spec and NextRunAt.
	// It returns the row after the call.
	PeriodicEnsure(ctx context.Context, params *PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error)
	// PeriodicList returns every schedule row in name order.
	PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error)
	// PeriodicAdvance moves schedule Name from From to Next in one
	// conditional write: only while its NextRunAt equals From and the leader
	// lease LeaderName is held with LeaderToken and unexpired on the database
	// clock. It records LastRunAt = SlotAt and LastJobID (when not zero), and
	// reports whether it wrote. Run it in the transaction that inserts the
	// slot's job, so the job and the advance commit together or not at all.
	PeriodicAdvance(ctx context.Context, params *PeriodicAdvanceParams) (bool, error)

	// JobCount counts the jobs that match the filter.
	JobCount(ctx context.Context, params *JobCountParams) (int64, error)
	// JobBulk applies one batch of a bulk action atomically (see
	// JobBulkParams): the jobs examined are those matching the filter, not
	// running, with an ID above AfterID, the first Limit in ID order. A job
	// that would hold a unique key another job holds is skipped and
	// reported in Conflicts, not an error for the batch.
	JobBulk(ctx context.Context, params *JobBulkParams) (*JobBulkResult, error)
	// AuditInsert appends an entry to the audit trail, timed by the
	// database clock, and returns its ID. Run it on the executor of the
	// action's transaction, so the action and its entry commit together.
	AuditInsert(ctx context.Context, params *AuditInsertParams) (int64, error)
	// AuditList returns the audit entries matching the filter, newest first.
	AuditList(ctx context.Context, params *AuditListParams) ([]*leasetype.AuditRow, error)

	// JobClaimKeyed is JobClaim with per-key flow control (see
	// JobClaimKeyedParams), in the caller's limited-claim transaction: jobs
	// whose key is at its limit or rate, and sequenced jobs whose
	// predecessor is not finished (or, by policy, failed), are skipped, not
	// claimed. Running counts see only unexpired leases on the database
	// clock. Rows come back in claim order.
	JobClaimKeyed(ctx context.Context, params *JobClaimKeyedParams) ([]*leasetype.JobRow, error)
	// KeyWindowAdd adds starts to per-key rate windows: a key's row is
	// created, reset to the window when it holds an older one, or added to.
	KeyWindowAdd(ctx context.Context, params *KeyWindowAddParams) error
	// KeyWindowPrune deletes up to Limit rate-window rows whose window ended
	// on the database clock, and returns how many.
	KeyWindowPrune(ctx context.Context, params *KeyWindowPruneParams) (int64, error)
	// SequenceBlocked lists the blocked sequences (see SequenceBlockedRow),
	// in sequence order.
	SequenceBlocked(ctx context.Context, params *SequenceBlockedParams) ([]*SequenceBlockedRow, error)
	// KeyStats reports the keys of unfinished jobs: the top keys by
	// waiting jobs with their running counts, and per queue a summary of
	// every key with waiting jobs (see KeyStatsResult).
	KeyStats(ctx context.Context, params *KeyStatsParams) (*KeyStatsResult, error)

	// ClientRegister upserts a working client's registry row (see
	// ClientRegisterParams) in one statement.
	ClientRegister(ctx context.Context, params *ClientRegisterParams) error
	// ClientList returns the registry rows in owner order, each with Alive
	// computed on the database clock.
	ClientList(ctx context.Context, params *ClientListParams) ([]*leasetype.ClientRow, error)
	// ClientRemove deletes Owner's registry row and reports whether one existed.
	ClientRemove(ctx context.Context, params *ClientRemoveParams) (bool, error)
	// ClientPrune deletes the registry rows that expired more than OlderThan
	// ago on the database clock, and returns how many. Safe to run
	// concurrently from many clients.
	ClientPrune(ctx context.Context, params *ClientPruneParams) (int64, error)

	// MigrationApplied returns the applied migration versions in order,
	// creating the bookkeeping table when missing.
	MigrationApplied(ctx context.Context) ([]int, error)
	// MigrationRecord marks Migration's version applied (Up) or removes it
	// (not Up).
	MigrationRecord(ctx context.Context, params *MigrationRecordParams) error
}

// ExecutorTx is an Executor inside a transaction the driver started.
type ExecutorTx interface {
	Executor
	// Commit commits the transaction.
	Commit(ctx context.Context) error
	// Rollback rolls it back; after Commit it is a no-op.
	Rollback(ctx context.Context) error
}

// JobInsertManyParams are the jobs JobInsertMany inserts.
type JobInsertManyParams struct {
	// Jobs are the jobs to insert, in the order of the results.
	Jobs []*JobInsertParams
	// SenderTracker, when not nil, is told which session sends the notices
	// of the insert (see SenderTracker for who reports to it); nil reports
	// to no one.
	SenderTracker SenderTracker
}

// JobInsertFastParams are the jobs JobInsertFast inserts.
type JobInsertFastParams struct {
	// Jobs are the jobs to insert; none may have a UniqueKey.
	Jobs []*JobInsertParams
	// SenderTracker is as in JobInsertManyParams.
	SenderTracker SenderTracker
}

// JobInsertParams is one job to insert.
type JobInsertParams struct {
	// Kind names the job's worker.
	Kind string
	// Queue is the queue the job is claimed from.
	Queue string
	// Priority orders claims, lower first; zero means the column default, 1.
	Priority int
	// EncodedArgs is the job's arguments as JSON.
	EncodedArgs []byte
	// Metadata is a JSON object; empty is stored as EmptyMetadata.
	Metadata []byte
	// UniqueKey, when not empty, is the key at most one job holds at a time
	// (see UniqueFinished for which jobs hold it).
	UniqueKey string
	// MaxAttempts is how many attempts the job gets before it is discarded.
	MaxAttempts int
	// LeaseTTL overrides the worker's lease duration for this job; zero keeps it.
	LeaseTTL time.Duration
	// ScheduledAt is when the job may first run; nil means now (database clock).
	ScheduledAt *time.Time
	// UniqueFinished lists finished states (completed, discarded,
	// cancelled) in which this job keeps holding its UniqueKey; by default
	// only unfinished jobs (available, scheduled, running, retryable, stuck)
	// hold a key. Stored with the job (the bitmask UniqueFinishedMask
	// encodes) and enforced by the unique index.
	UniqueFinished []leasetype.JobState
	// Key, when not empty, is the job's flow-control key (the flow_key
	// column), at most MaxKeyLen bytes.
	Key string
	// Sequence, when not empty, is the job's sequence key (the
	// sequence_key column), at most MaxKeyLen bytes.
	Sequence string

	// DependsOn are the IDs of existing jobs this one waits for; see
	// JobInsertMany and DependencyExecutor.
	DependsOn []int64
	// DependsOnIndex are the positions, in the same JobInsertMany call, of
	// earlier jobs this one waits for.
	DependsOnIndex []int
	// DependencyPolicy applies when a dependency is discarded or
	// cancelled; empty means leasetype.DependencyCancel.
	DependencyPolicy leasetype.DependencyPolicy
}

// MaxKeyLen is the longest flow-control or sequence key, in bytes.
const MaxKeyLen = 256

// JobInsertResult is the outcome of inserting one job.
type JobInsertResult struct {
	// Job is the inserted job, or the existing one when UniqueSkipped.
	Job *leasetype.JobRow
	// UniqueSkipped is set when a job with the same unique key already existed.
	UniqueSkipped bool
}

// JobClaimParams selects and leases jobs.
type JobClaimParams struct {
	// Queue is the queue to claim from.
	Queue string
	// Max is the most jobs to claim; at least 1.
	Max int
	// Owner identifies the claiming worker instance.
	Owner string
	// DefaultLeaseTTL is the lease duration of a job whose kind has none in
	// KindLeaseTTL and that has no LeaseTTL of its own.
	DefaultLeaseTTL time.Duration
	// KindLeaseTTL is the lease duration per kind, for jobs without a
	// LeaseTTL of their own.
	KindLeaseTTL map[string]time.Duration
	// StuckKinds are the kinds whose claimed jobs get ExpiryStuck.
	StuckKinds []string
	// Kinds, when not empty, restricts the claim to jobs of these kinds.
	Kinds []string
	// ExcludeKinds are never claimed.
	ExcludeKinds []string
	// After, when not nil, is where the claim may start: the position in
	// claim order of the last job of the caller's previous claim, which took
	// every claimable job it could before that point. A driver whose claim
	// scan pays for the jobs already claimed (Postgres walks their dead
	// index entries until vacuum removes them) starts after it; a job
	// before it is then not claimed by this call. Drivers may ignore it.
	After *ClaimPosition
}

// ClaimPosition is a job's place in claim order: by priority, scheduled
// time, then ID.
type ClaimPosition struct {
	Priority    int
	ScheduledAt time.Time
	ID          int64
}

// PositionOf returns job's place in claim order.
func PositionOf(job *leasetype.JobRow) ClaimPosition {
	return ClaimPosition{Priority: job.Priority, ScheduledAt: job.ScheduledAt, ID: job.ID}
}

// Compare orders positions as claims do: -1 when p comes first, 1 when q
// does, 0 when equal.
func (p ClaimPosition) Compare(q ClaimPosition) int {
	if p.Priority != q.Priority {
		return cmp.Compare(p.Priority, q.Priority)
	}
	if c := p.ScheduledAt.Compare(q.ScheduledAt); c != 0 {
		return c
	}
	return cmp.Compare(p.ID, q.ID)
}

// JobHeartbeatParams renews leases.
type JobHeartbeatParams struct {
	// Owner is the caller's lease owner, the JobClaimParams.Owner it claimed
	// the jobs with. A lease whose job has another owner is not renewed,
	// whatever its token.
	Owner string
	// Leases are the leases to renew.
	Leases []LeaseRenewal
}

// LeaseRenewal is one lease to renew.
type LeaseRenewal struct {
	// ID is the job's.
	ID int64
	// Token is the fencing token the caller holds.
	Token int64
	// TTL is the lease's new duration from now.
	TTL time.Duration
}

// JobFinishParams ends leases.
type JobFinishParams struct {
	// Owner is the caller's lease owner, the JobClaimParams.Owner it claimed
	// the jobs with. An item whose job has another owner writes nothing,
	// whatever its token.
	Owner string
	// Items are the leases to end. The client reuses the slice and the
	// params once the call returns: an executor must not keep either
	// past the call.
	Items []*JobFinish
	// TxBound, when > 0 and the executor runs in a caller's transaction,
	// asks a driver that implements TxBounder to make the database abort
	// that transaction unless it commits within TxBound of the call: the
	// completion holds the job's row lock until the transaction ends, and
	// a stalled caller must not hold it past its lease. A bound already
	// tighter in the transaction is kept. Other executors and drivers
	// ignore it.
	TxBound time.Duration
}

// TxBounder is implemented by drivers whose JobFinish honours
// JobFinishParams.TxBound.
type TxBounder interface {
	// BoundsTx reports whether the database this driver talks to aborts a
	// caller's transaction that outlives JobFinishParams.TxBound.
	BoundsTx() bool
}

// LeasedInserter is implemented by executors that can insert jobs already
// leased: running, leased to an owner, as JobClaim would lease them. A
// client that works the queue of jobs it inserts on its own (outside a
// caller's transaction), with workers free and no backlog, inserts them
// leased to itself: they start when the insert returns, without a wake-up,
// a claim statement and the row's second version that a claim writes.
// Without it the client inserts, then wakes its claim loop.
type LeasedInserter interface {
	// JobInsertLeased is JobInsertMany(insert), except that jobs lease
	// selects are inserted running and leased as JobClaim(lease) leases:
	// Attempt and LeaseToken 1, LeaseOwner lease.Owner, LeasedAt now and
	// LeaseUntil now plus the TTL (the job's own, else by kind, else the
	// default) on the database clock, heartbeat fields zero, ExpiryPolicy
	// by lease.StuckKinds. lease selects the first lease.Max jobs, in
	// input order, of queue lease.Queue that lease.Kinds and
	// lease.ExcludeKinds let through and that have no dependencies; of
	// those, one scheduled in the future, or whose queue is paused when
	// the insert runs, is inserted as JobInsertMany inserts it. Jobs not
	// leased notify as in JobInsertMany; a leased job notifies no one.
	// lease.After is ignored: a leased job may start before older
	// claimable jobs of its queue. A job whose unique key is held is not
	// inserted, as in JobInsertMany. The results hold the rows as
	// written: a leased job is running.
	JobInsertLeased(ctx context.Context, insert *JobInsertManyParams, lease *JobClaimParams) ([]*JobInsertResult, error)
}

// FinishClaimer is implemented by executors that can end leases and claim
// jobs in one transaction, in fewer round trips to the database than the
// two calls. The client's claim then carries the outcomes waiting to be
// written, and a drain costs one transaction per batch instead of two.
// Without it the client writes outcomes and claims jobs in separate calls.
type FinishClaimer interface {
	// JobFinishAndClaim is JobFinish(finish) followed by JobClaim(claim),
	// in one transaction: both take effect or neither does. It returns
	// JobFinish's IDs and JobClaim's rows. An error means neither took
	// effect, or, when the connection was lost during the commit, that
	// both may have: the caller treats the outcomes as it treats a failed
	// JobFinish.
	JobFinishAndClaim(ctx context.Context, finish *JobFinishParams, claim *JobClaimParams) ([]int64, []*leasetype.JobRow, error)
}

// AttemptsClaimer is implemented by executors that can read the attempt
// rows of leases and claim jobs in one transaction, in fewer round trips
// than the two calls. The client's claim then carries the reads that
// confirm CompleteTx commits, which otherwise cost a transaction of their
// own. Without it the client confirms them with JobAttempts alone.
type AttemptsClaimer interface {
	// JobAttemptsAndClaim is JobAttempts(attempts), which names Leases,
	// followed by JobClaim(claim), in one transaction. It returns
	// JobAttempts's rows and JobClaim's. An error means the claim did not
	// take effect, or, when the connection was lost during the commit,
	// that it may have: its jobs are then leased to no one known and are
	// reclaimed when their leases expire.
	JobAttemptsAndClaim(ctx context.Context, attempts *JobAttemptsParams, claim *JobClaimParams) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error)
}

// JobFinish ends one lease.
type JobFinish struct {
	// ID is the job's.
	ID int64
	// Token is the fencing token the caller holds.
	Token int64
	// State is the job's new state: completed, retryable, discarded,
	// cancelled, available (released) or scheduled (snoozed).
	State leasetype.JobState
	// Outcome goes on the attempt row.
	Outcome leasetype.AttemptOutcome
	// ScheduledAt is the next run for retryable and scheduled; nil means now.
	ScheduledAt *time.Time
	// Error is recorded on the attempt row and, when not empty, as LastError.
	Error string
	// CountError adds one to Errors (handler errors and panics).
	CountError bool
}

// JobExpireParams reclaims expired leases.
type JobExpireParams struct {
	// Limit is the most jobs to reclaim.
	Limit int
	// MaxExpiries, when > 0, is the Expiries at which a job becomes stuck.
	MaxExpiries int
	// Queue and Kinds, when either is set, restrict the expiry to the
	// running jobs of Queue and those of one of Kinds in any queue: the jobs
	// a limited claim counts (JobCountRunning). Unset, every expired lease
	// qualifies.
	Queue string
	Kinds []string
}

// JobGetParams selects the job JobGet returns.
type JobGetParams struct {
	// ID is the job's.
	ID int64
}

// JobListParams filters a job listing. Zero fields do not filter.
type JobListParams struct {
	// States, when not empty, keeps jobs in one of them.
	States []leasetype.JobState
	// Queue keeps jobs of this queue.
	Queue string
	// Kind keeps jobs of this kind.
	Kind string
	// UniqueKey keeps jobs with this unique key.
	UniqueKey string
	// Key keeps jobs with this flow-control key.
	Key string
	// Sequence keeps jobs with this sequence key.
	Sequence string
	// BeforeID pages: only jobs with a smaller ID.
	BeforeID int64
	// Limit is the most rows to return; zero means 100.
	Limit int
}

// JobAttemptsParams selects the job whose attempts JobAttempts returns, or
// the attempt rows of many leases at once.
type JobAttemptsParams struct {
	// JobID is the job's ID; ignored when Leases is not empty.
	JobID int64
	// Leases, when not empty, selects instead the attempt rows of these
	// leases (a job and a fencing token each: the row's key) in one
	// statement, ordered by job ID and token. A lease that has no row is
	// missing from the result. At most MaxAttemptLeases; a lease named
	// twice is returned once. The client reads back the outcomes it cannot
	// confirm otherwise (CompleteTx commits, refused or ambiguous writes)
	// with it, a batch in one round trip.
	Leases []LeaseRef
}

// MaxAttemptLeases is the most leases one JobAttempts call may name in
// JobAttemptsParams.Leases.
const MaxAttemptLeases = 1000

// ValidateJobAttempts checks JobAttemptsParams as every backend must.
func ValidateJobAttempts(p *JobAttemptsParams) error {
	if len(p.Leases) > MaxAttemptLeases {
		return fmt.Errorf("attempts: %d leases named, at most %d", len(p.Leases), MaxAttemptLeases)
	}
	return nil
}

// JobSetStateParams is an operator's state change.
type JobSetStateParams struct {
	// ID is the job's.
	ID int64
	// FromStates are the states the job may be in for the change to apply.
	FromStates []leasetype.JobState
	// State is the job's new state.
	State leasetype.JobState
	// ScheduledAt is set with the state when not nil (nil leaves it, except
	// that available means now).
	ScheduledAt *time.Time
	// ResetErrors zeroes Errors and Expiries, so a retried job gets its full budget.
	ResetErrors bool
	// Note, when not empty, becomes LastError.
	Note string
}

// JobThroughputParams selects the window of JobThroughput.
type JobThroughputParams struct {
	// Since is the start of the window.
	Since time.Time
}

// QueueSetPausedParams pauses or resumes a queue.
type QueueSetPausedParams struct {
	// Name is the queue's.
	Name string
	// Paused pauses the queue when set and resumes it otherwise.
	Paused bool
}

// QueueRow is a queue's control row.
type QueueRow struct {
	Name string
	// PausedAt is when the queue was paused; nil when it is active.
	PausedAt  *time.Time
	UpdatedAt time.Time
}

// JobCountRunningParams selects what JobCountRunning counts.
type JobCountRunningParams struct {
	// Queue is the queue whose running jobs are counted (all kinds).
	Queue string
	// Kinds are the kinds whose running jobs are counted (all queues).
	Kinds []string
}

// RunningCount is the number of running jobs, by whether their lease has
// expired.
type RunningCount struct {
	// Queue counts the jobs of the queue asked for whose lease has not
	// expired.
	Queue int64
	// Kinds counts, per kind asked for, the jobs of that kind in every queue
	// whose lease has not expired. Every kind asked for has an entry.
	Kinds map[string]int64
	// QueueExpired and KindsExpired count the same jobs whose lease has
	// expired but that are still running: no JobExpire has reclaimed them.
	// KindsExpired has an entry for every kind asked for.
	QueueExpired int64
	KindsExpired map[string]int64
}

// Limit scopes.
const (
	LimitScopeQueue = "queue"
	LimitScopeKind  = "kind"
)

// LimitKey names a limit row: a queue's or a kind's.
type LimitKey struct {
	Scope string // LimitScopeQueue or LimitScopeKind
	Name  string
}

// LimitLockParams selects the limit rows LimitLock locks.
type LimitLockParams struct {
	// Keys are the rows to create when missing and lock, in this order.
	Keys []LimitKey
}

// LimitRow is a locked limit row.
type LimitRow struct {
	Key LimitKey
	// WindowStart is the start of the current rate window; nil before the first.
	WindowStart *time.Time
	// WindowCount is the jobs claimed in that window.
	WindowCount int64
	// Now is the database clock once the lock was held.
	Now time.Time
}

// LimitSetWindowParams records a rate window.
type LimitSetWindowParams struct {
	// Key names the limit row.
	Key LimitKey
	// WindowStart is the start of the rate window.
	WindowStart time.Time
	// WindowCount is the jobs claimed in that window.
	WindowCount int64
}

// JobCancelRunningParams selects the job JobCancelRunning asks to cancel.
type JobCancelRunningParams struct {
	// ID is the job's.
	ID int64
}

// JobCancelRequestedParams selects the cancellations a client must act on.
type JobCancelRequestedParams struct {
	// Owner is the lease owner whose jobs are returned.
	Owner string
}

// LeaseRef names one lease: a job and its fencing token.
type LeaseRef struct {
	ID    int64
	Token int64
}

// JobPruneParams selects finished jobs to delete.
type JobPruneParams struct {
	// States are the states of the jobs to delete.
	States []leasetype.JobState
	// OlderThan is how long before the database clock a job must have
	// finished to be deleted.
	OlderThan time.Duration
	// Limit is the most jobs to delete.
	Limit int
}

// AttemptPruneParams selects attempt rows to delete.
type AttemptPruneParams struct {
	// OlderThan is how long before the database clock an attempt must have
	// finished to be deleted.
	OlderThan time.Duration
	// Limit is the most rows to delete.
	Limit int
}

// LeaderParams acquires, renews or resigns a leader lease.
type LeaderParams struct {
	// Name is the lease's.
	Name string
	// Owner identifies the caller.
	Owner string
	// Token is the caller's current token (zero when it holds nothing).
	Token int64
	// TTL is the lease's duration from now once taken or renewed.
	TTL time.Duration
}

// LeaderRow is a leader lease.
type LeaderRow struct {
	Name       string
	Owner      string
	Token      int64
	LeaseUntil time.Time
	AcquiredAt time.Time
}

// PeriodicEnsureParams registers a schedule.
type PeriodicEnsureParams struct {
	// Name is the schedule's.
	Name string
	// Spec is its schedule as text; a changed Spec replaces NextRunAt.
	Spec string
	// NextRunAt is its next slot, stored when the row is created or its
	// Spec changes.
	NextRunAt time.Time
}

// PeriodicAdvanceParams moves a schedule to its next slot.
type PeriodicAdvanceParams struct {
	// Name is the schedule's.
	Name string
	// From is the NextRunAt the caller read; the write happens only while
	// it is still stored.
	From time.Time
	// Next becomes NextRunAt.
	Next time.Time
	// SlotAt becomes LastRunAt.
	SlotAt time.Time
	// LastJobID, when not zero, becomes LastJobID.
	LastJobID int64
	// LeaderName is the leader lease the caller must hold.
	LeaderName string
	// LeaderToken is the caller's token of that lease.
	LeaderToken int64
}

// MigrationRecordParams records a migration applied or reverted.
type MigrationRecordParams struct {
	// Migration is the migration; its Version is recorded.
	Migration Migration
	// Up records it applied; otherwise its record is removed.
	Up bool
}
