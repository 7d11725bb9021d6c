package leasetype

import "time"

// AuditRow is one entry of the audit trail: an operator action (a retry, a
// discard, a cancellation, a resolution, a queue paused or resumed, or one
// batch of a bulk action), who took it and what it changed.
type AuditRow struct {
	// ID orders the trail: a newer entry has a larger ID.
	ID int64 `json:"id"`
	// At is when the action was recorded, on the database clock.
	At time.Time `json:"at"`
	// Actor is who acted, as the caller identified itself: "token",
	// "basic:alice" or "session" from the dashboard, "cli:alice@host" from
	// the CLI, or what a library caller passed to leasehold.WithActor.
	Actor string `json:"actor"`
	// Action is what was done: "retry", "cancel", "cancel_request",
	// "discard", "resolve_succeeded", "resolve_failed", "resolve_retry",
	// "pause", "resume", or "bulk_" and the bulk action ("bulk_retry").
	Action string `json:"action"`
	// Queue is the queue acted on (the job's queue for a job action, the
	// filter's for a bulk action); empty when the action named none.
	Queue string `json:"queue,omitempty"`
	// JobID is the job of a single-job action; 0 otherwise.
	JobID int64 `json:"job_id,omitempty"`
	// JobIDs are the jobs a bulk batch changed, in ID order.
	JobIDs []int64 `json:"job_ids,omitempty"`
	// Count is how many jobs or queues the action changed: 0 when it was
	// refused (the job was in a state the action does not apply to).
	Count int64 `json:"count"`
	// Note is the operator's note, when one was given.
	Note string `json:"note,omitempty"`
	// Detail describes the outcome: a refusal's reason, a bulk batch's
	// filter and the jobs it skipped.
	Detail string `json:"detail,omitempty"`
}
