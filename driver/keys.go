package driver

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// JobClaimKeyedParams is a claim that honours per-key flow control: key
// limits, per-key rate windows, fairness across keys and sequences. It runs
// in the limited claim's transaction (see Executor.JobClaimKeyed), after the
// limit rows that serialise the claims it competes with are locked.
type JobClaimKeyedParams struct {
	// Claim is the plain claim: queue, most jobs, owner, TTLs, stuck kinds,
	// kind filters. Claim.After is ignored: a keyed claim always starts at
	// the head.
	Claim *JobClaimParams
	// KeyLimit, when > 0, is the most running jobs (unexpired lease) of the
	// queue with the same key; a job whose key has that many is skipped.
	KeyLimit int
	// KindKeyLimit, when > 0, is the most running jobs of the one kind in
	// Claim.Kinds with the same key, in every queue.
	KindKeyLimit int
	// KeyRate, when not nil, bounds the starts per key in the current rate
	// window: a job is skipped when its key's window count (the
	// leasehold_key_window row of KeyRate.Scope and the key, counted while
	// its window start is KeyRate.WindowStart) plus the jobs of its key this
	// claim takes before it reaches KeyRate.Limit. The caller records the
	// starts with KeyWindowAdd in the same transaction.
	KeyRate *KeyRateWindow
	// Fair orders the claim round-robin across keys: first by each job's
	// rank within its key (by priority, scheduled time, ID) plus its key's
	// running jobs in the queue, then in claim order. Jobs without a key
	// form one group of their own, counted with no running jobs. A driver
	// may rank only the keys one claim visits, provided successive claims
	// go round every key with claimable jobs (every backend walks the keys
	// from a cursor kept with the limit rows).
	Fair bool
	// SequenceContinueKinds are the kinds whose sequenced jobs may start
	// after a discarded or cancelled predecessor; for other kinds such a
	// predecessor blocks the sequence.
	SequenceContinueKinds []string
}

// KeyRateWindow is the current fixed window of a per-key rate limit.
type KeyRateWindow struct {
	// Scope names whose limit it is (a queue's).
	Scope LimitKey
	// Limit is the most starts per key per window.
	Limit int
	// WindowStart and WindowEnd bound the window on the database clock.
	WindowStart, WindowEnd time.Time
}

// KeyWindowAddParams records starts in per-key rate windows.
type KeyWindowAddParams struct {
	// Window is the window the starts fall in.
	Window KeyRateWindow
	// Starts is the number of jobs started per key.
	Starts map[string]int64
}

// KeyWindowPruneParams selects ended rate windows to delete.
type KeyWindowPruneParams struct {
	// Limit is the most rows to delete.
	Limit int
}

// LockedKeyedClaimer is implemented by an executor that runs a whole
// limited claim made of one keyed statement in one round trip: LimitLock of
// Keys, then JobClaimKeyed, then commit, as one transaction whose claim
// reads a snapshot taken after the locks were had. A client uses it for a
// queue with key options but no rate limits and no kind limits, where it
// has nothing to do between those steps. It must not be called inside a
// transaction.
type LockedKeyedClaimer interface {
	JobClaimKeyedLocked(ctx context.Context, locks *LimitLockParams, params *JobClaimKeyedParams) ([]*leasetype.JobRow, error)
}

// QueueKeyPruner is implemented by an executor whose backend keeps the keys
// of each queue's jobs in a table of their own, which its keyed claims walk
// (Postgres): QueueKeyPrune checks up to Scan keys in (queue, key) order
// after After, and deletes those that no job has unless completed. The
// pruner calls it every few seconds, going round the table a step at a
// time, so that the keys of finished work do not linger in the walk.
type QueueKeyPruner interface {
	QueueKeyPrune(ctx context.Context, params *QueueKeyPruneParams) (*QueueKeyPruneResult, error)
}

// QueueKey names one key of one queue.
type QueueKey struct {
	Queue, Key string
}

// QueueKeyPruneParams is one step of a QueueKeyPrune scan.
type QueueKeyPruneParams struct {
	// After is where the scan goes on: the keys after it in (queue, key)
	// order. The zero value starts at the first key.
	After QueueKey
	// Scan is the most keys checked; zero means 1,000.
	Scan int
}

// QueueKeyPruneResult is what one QueueKeyPrune step did.
type QueueKeyPruneResult struct {
	// Deleted is the number of keys deleted.
	Deleted int64
	// Next is the last key checked, the After of the next step; nil when
	// the step reached the end of the table.
	Next *QueueKey
}

// SequenceBlockedParams selects the blocked sequences listed.
type SequenceBlockedParams struct {
	// Queue, when not empty, keeps the sequences whose blocking job is in it.
	Queue string
	// Limit is the most rows to return; zero means 100.
	Limit int
}

// SequenceBlockedRow is a sequence held up by a job that will not run again
// by itself: its oldest job not completed is discarded, cancelled or stuck.
type SequenceBlockedRow struct {
	// Sequence is the sequence key.
	Sequence string `json:"sequence"`
	// Job is the blocking job.
	Job *leasetype.JobRow `json:"job"`
	// Waiting counts the jobs of the sequence after it that are not finished.
	Waiting int64 `json:"waiting"`
}

// KeyWaitingBounds are the upper bounds of the buckets of
// KeyQueueStatsRow.WaitingBuckets: a key with n waiting jobs counts in every
// bucket whose bound is at least n, as a cumulative histogram does.
var KeyWaitingBounds = []int64{1, 10, 100, 1000, 10000}

// KeyStatsParams selects the keys KeyStats reports.
type KeyStatsParams struct {
	// Queue, when not empty, keeps the keys of jobs in this queue.
	Queue string
	// Limit is the most keys in KeyStatsResult.Top; zero means 20.
	Limit int
}

// KeyStatsRow is one key of a queue with its jobs not finished. Waiting
// counts its jobs available, scheduled or retryable (scheduled ones
// included whether or not their time has come); Running its running jobs.
type KeyStatsRow struct {
	// Queue is the queue of the jobs counted.
	Queue string `json:"queue"`
	// Key is the flow-control key (InsertOpts.Key, WorkerOpts.KeyBy).
	Key string `json:"key"`
	// Waiting is the number of its jobs not yet started.
	Waiting int64 `json:"waiting"`
	// Running is the number of its running jobs.
	Running int64 `json:"running"`
}

// KeyQueueStatsRow sums up the keys of one queue with waiting jobs, in a
// size that does not grow with the number of keys.
type KeyQueueStatsRow struct {
	// Queue is the queue.
	Queue string `json:"queue"`
	// Keys is the number of distinct keys with at least one waiting job.
	Keys int64 `json:"keys"`
	// Waiting is the number of waiting jobs with a key.
	Waiting int64 `json:"waiting"`
	// MaxWaiting is the most waiting jobs of one key.
	MaxWaiting int64 `json:"max_waiting"`
	// WaitingBuckets[i] is the number of keys with at most
	// KeyWaitingBounds[i] waiting jobs (cumulative).
	WaitingBuckets []int64 `json:"waiting_buckets"`
}

// KeyStatsResult is what KeyStats returns.
type KeyStatsResult struct {
	// Top holds the keys with the most waiting jobs, then the most running
	// ones, then in queue and key order, at most Limit of them.
	Top []*KeyStatsRow `json:"top"`
	// Queues sums up every key with waiting jobs per queue, in queue order.
	Queues []*KeyQueueStatsRow `json:"queues"`
}
