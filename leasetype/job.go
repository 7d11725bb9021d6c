// Package leasetype holds the row types shared by the leasehold client and its
// database drivers. It imports nothing from either, so both can depend on it
// without depending on each other.
package leasetype

import "time"

// JobState is the state of a job in its life cycle. See the package leasehold
// documentation for the state machine.
type JobState string

// Job states.
const (
	// JobStatePending jobs wait for their dependencies (InsertOpts.DependsOn)
	// to complete; the write that completes the last one makes them
	// available. They are never claimed, expired or pruned.
	JobStatePending JobState = "pending"
	// JobStateAvailable jobs can be claimed now.
	JobStateAvailable JobState = "available"
	// JobStateScheduled jobs can be claimed once their ScheduledAt passes.
	JobStateScheduled JobState = "scheduled"
	// JobStateRunning jobs are held by a worker under a lease.
	JobStateRunning JobState = "running"
	// JobStateRetryable jobs failed and will be claimed again at ScheduledAt.
	JobStateRetryable JobState = "retryable"
	// JobStateCompleted jobs finished successfully. Final.
	JobStateCompleted JobState = "completed"
	// JobStateDiscarded jobs failed permanently or ran out of attempts ("dead").
	// Final until retried by hand.
	JobStateDiscarded JobState = "discarded"
	// JobStateCancelled jobs were cancelled by the handler or an operator.
	// Final until retried by hand.
	JobStateCancelled JobState = "cancelled"
	// JobStateStuck jobs lost their lease under a policy that forbids a blind
	// retry. They wait for reconciliation: an operator or a program decides
	// whether the work happened.
	JobStateStuck JobState = "stuck"
)

// JobStates lists every state, in life-cycle order.
func JobStates() []JobState {
	return []JobState{
		JobStatePending, JobStateAvailable, JobStateScheduled, JobStateRunning, JobStateRetryable,
		JobStateCompleted, JobStateDiscarded, JobStateCancelled, JobStateStuck,
	}
}

// Finalized reports whether the state is one a job leaves only by an explicit
// operator action (completed, discarded or cancelled).
func (s JobState) Finalized() bool {
	return s == JobStateCompleted || s == JobStateDiscarded || s == JobStateCancelled
}

// Valid reports whether s is one of the known states.
func (s JobState) Valid() bool {
	for _, v := range JobStates() {
		if s == v {
			return true
		}
	}
	return false
}

// ExpiryPolicy says what happens to a job whose lease expired while running.
type ExpiryPolicy string

// Expiry policies.
const (
	// ExpiryRetry puts the job back to available at once. The expiry is counted
	// in Expiries, not in Errors.
	ExpiryRetry ExpiryPolicy = "retry"
	// ExpiryStuck moves the job to the stuck state, where it waits for
	// reconciliation. Use it where the work may have had an outside effect
	// that must not be repeated blindly (a payment charge).
	ExpiryStuck ExpiryPolicy = "stuck"
)

// JobRow is a job as stored in the database.
type JobRow struct {
	// ID is the job's unique, database-assigned identifier.
	ID int64 `json:"id"`
	// Kind names the job's type and selects its worker.
	Kind string `json:"kind"`
	// Queue is the queue the job is in.
	Queue string `json:"queue"`
	// State is the job's state.
	State JobState `json:"state"`
	// Priority orders claims within a queue: 1 is claimed first, 4 last.
	Priority int `json:"priority"`
	// EncodedArgs is the job's arguments as JSON.
	EncodedArgs []byte `json:"args"`
	// Metadata is a JSON object of free-form metadata.
	Metadata []byte `json:"metadata"`
	// UniqueKey is the job's idempotency key, empty when it has none.
	UniqueKey string `json:"unique_key,omitempty"`

	// Attempt counts the leases granted on the job, including the current one.
	Attempt int `json:"attempt"`
	// MaxAttempts bounds the handler failures: a job whose handler has failed
	// MaxAttempts times is discarded.
	MaxAttempts int `json:"max_attempts"`
	// Errors counts the attempts that ended in a handler error or panic.
	Errors int `json:"errors"`
	// Expiries counts the attempts that ended because the lease expired (a
	// crashed, paused or partitioned worker). They are not handler errors.
	Expiries int `json:"expiries"`
	// LastError is the error text of the last failed attempt.
	LastError string `json:"last_error,omitempty"`

	// LeaseToken is the fencing token of the current or last lease. It grows
	// with every lease granted on this job.
	LeaseToken int64 `json:"lease_token"`
	// LeaseOwner identifies the worker instance holding (or last holding) the lease.
	LeaseOwner string `json:"lease_owner,omitempty"`
	// LeasedAt is when the current or last lease was granted (database clock).
	LeasedAt *time.Time `json:"leased_at,omitempty"`
	// LeaseUntil is when the current or last lease expires (database clock).
	LeaseUntil *time.Time `json:"lease_until,omitempty"`
	// HeartbeatAt is the last renewal of the current lease.
	HeartbeatAt *time.Time `json:"heartbeat_at,omitempty"`
	// Heartbeats counts the renewals of the current lease.
	Heartbeats int `json:"heartbeats"`
	// LeaseTTL is the per-job lease duration, zero for the worker's default.
	LeaseTTL time.Duration `json:"lease_ttl,omitempty"`
	// ExpiryPolicy is the policy recorded by the claiming worker.
	ExpiryPolicy ExpiryPolicy `json:"expiry_policy,omitempty"`

	// ScheduledAt is the earliest time the job can be claimed.
	ScheduledAt time.Time `json:"scheduled_at"`
	// CreatedAt is when the job was inserted.
	CreatedAt time.Time `json:"created_at"`
	// FinalizedAt is when the job reached a final or stuck state.
	FinalizedAt *time.Time `json:"finalized_at,omitempty"`
	// CancelRequestedAt is when cancellation of the running job was asked
	// for (database clock); nil when it was not. Such a job ends cancelled
	// unless its handler completes it first.
	CancelRequestedAt *time.Time `json:"cancel_requested_at,omitempty"`

	// Key is the job's flow-control key (InsertOpts.Key or the kind's
	// KeyBy), empty when it has none: per-key limits, rate limits and
	// fairness count and order jobs by it.
	Key string `json:"key,omitempty"`
	// Sequence is the job's sequence key (InsertOpts.Sequence or the kind's
	// SequenceBy), empty when it has none: jobs with the same sequence run
	// one after another in ID order.
	Sequence string `json:"sequence,omitempty"`
	// Stage is the last stage checkpointed on the job (leasehold.Checkpoint),
	// empty when none was. A new attempt resumes after it.
	Stage string `json:"stage,omitempty"`
	// StageState is the JSON state recorded with Stage, nil when none was.
	StageState []byte `json:"stage_state,omitempty"`
}
