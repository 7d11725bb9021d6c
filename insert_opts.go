package leasehold

import (
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// InsertOpts are per-job insert options. Zero fields take the defaults: the
// args' own InsertOpts when they implement JobArgsWithInsertOpts, then the
// worker's options, then the client's.
type InsertOpts struct {
	// Queue is the queue to insert into; default "default".
	Queue string
	// Priority orders claims within a queue, 1 (first) to 4; default 1.
	Priority int
	// ScheduledAt delays the first run; zero means now.
	ScheduledAt time.Time
	// MaxAttempts bounds the handler errors before the job is discarded.
	MaxAttempts int
	// LeaseTTL overrides the lease duration for this job.
	LeaseTTL time.Duration
	// Metadata is stored with the job as a JSON object. Trace context and
	// other cross-cutting data travel here.
	Metadata map[string]any
	// UniqueKey is an idempotency key: while a job with the same key is not
	// completed, discarded or cancelled, inserting another returns the
	// existing job with UniqueSkipped set instead of inserting.
	UniqueKey string
	// UniqueOpts makes the job unique by its args, queue or period, and
	// can keep the key held in finished states; see UniqueOpts.
	UniqueOpts UniqueOpts
	// Key is the job's flow-control key (a customer, a merchant): the
	// per-key limits, rate limits and fairness of the queue and kind count
	// and order jobs by it. Empty takes the key the kind's WorkerOpts.KeyBy
	// derives from the args, if any. At most 256 bytes.
	Key string
	// Sequence is the job's sequence key: jobs with the same one run one
	// after another in insert (ID) order, each only once the one before it
	// completed. Empty takes the kind's WorkerOpts.SequenceBy, if any. At
	// most 256 bytes. Sequences are enforced by the keyed claim: see
	// QueueConfig.Sequenced.
	Sequence string

	// DependsOn are the IDs of jobs this one waits for: it is inserted in
	// state pending and becomes available in the same write that completes
	// the last of them (see the package documentation, Dependencies).
	DependsOn []int64
	// DependsOnIndex are positions, in the same InsertMany call, of earlier
	// jobs this one waits for (a later position is refused: that rules out
	// cycles).
	DependsOnIndex []int
	// DependencyPolicy says what happens when a dependency is discarded or
	// cancelled: DependencyCancel (the default) cancels this job, and the
	// jobs waiting on it; DependencyWait keeps it pending for an operator,
	// and retrying the dependency lets it continue.
	DependencyPolicy leasetype.DependencyPolicy
}

// InsertManyParams is one job of a batch insert.
type InsertManyParams struct {
	// Args are the job's arguments.
	Args JobArgs
	// InsertOpts are its options; nil for the defaults.
	InsertOpts *InsertOpts
}

// InsertResult is the outcome of an insert.
type InsertResult struct {
	// Job is the inserted job as the insert wrote it, or the existing one
	// when UniqueSkipped. A job the inserting client leased to itself to
	// start at once (see the package documentation, Claim order) is
	// running, with its lease.
	Job *leasetype.JobRow
	// UniqueSkipped is set when a job with the same unique key was already
	// waiting, running or stuck, and nothing was inserted.
	UniqueSkipped bool
}
