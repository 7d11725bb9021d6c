package leasetype

import "time"

// AttemptOutcome says how a lease ended.
type AttemptOutcome string

// Attempt outcomes.
const (
	// OutcomeCompleted: the handler succeeded and the completion was written.
	OutcomeCompleted AttemptOutcome = "completed"
	// OutcomeFailed: the handler returned an error.
	OutcomeFailed AttemptOutcome = "failed"
	// OutcomePanicked: the handler panicked; the error holds the stack.
	OutcomePanicked AttemptOutcome = "panicked"
	// OutcomeLeaseExpired: the lease expired before the holder finished (it
	// crashed, paused or lost the database) and the expirer reclaimed the job.
	OutcomeLeaseExpired AttemptOutcome = "lease_expired"
	// OutcomeReleased: the client gave the lease back without running the
	// handler (it was stopping) or the kind is not registered on it.
	OutcomeReleased AttemptOutcome = "released"
	// OutcomeCancelled: the handler cancelled the job.
	OutcomeCancelled AttemptOutcome = "cancelled"
	// OutcomeSnoozed: the handler asked to run again later.
	OutcomeSnoozed AttemptOutcome = "snoozed"
)

// AttemptRow is one lease of a job, as recorded in the append-only attempt
// history when the lease ended. A lease that is still held has no row yet;
// its details are on the job row.
type AttemptRow struct {
	// JobID is the job the lease was on.
	JobID int64 `json:"job_id"`
	// Attempt is the job's attempt number for this lease.
	Attempt int `json:"attempt"`
	// Token is the lease's fencing token.
	Token int64 `json:"token"`
	// Owner identifies the worker instance that held the lease.
	Owner string `json:"owner"`
	// LeasedAt is when the lease was granted (database clock).
	LeasedAt time.Time `json:"leased_at"`
	// LeaseUntil is the lease's expiry as last renewed.
	LeaseUntil time.Time `json:"lease_until"`
	// LastHeartbeatAt is the last renewal, nil if it was never renewed.
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at,omitempty"`
	// Heartbeats counts the renewals.
	Heartbeats int `json:"heartbeats"`
	// FinishedAt is when the lease ended (database clock).
	FinishedAt time.Time `json:"finished_at"`
	// Outcome says how it ended.
	Outcome AttemptOutcome `json:"outcome"`
	// Error is the error text, if any.
	Error string `json:"error,omitempty"`
}
