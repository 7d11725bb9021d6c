package driver

import (
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
	// form one group of their own, counted with no running jobs.
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
