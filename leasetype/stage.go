package leasetype

import "time"

// StageRow is one fenced stage checkpoint, as recorded in the job's
// append-only stage history.
type StageRow struct {
	// JobID is the job checkpointed.
	JobID int64 `json:"job_id"`
	// Attempt is the job's attempt number when the checkpoint was written.
	Attempt int `json:"attempt"`
	// Token is the fencing token of the lease that wrote it.
	Token int64 `json:"token"`
	// Stage names the stage completed.
	Stage string `json:"stage"`
	// State is the JSON state recorded with it, nil when none.
	State []byte `json:"state,omitempty"`
	// At is when it was written (database clock).
	At time.Time `json:"at"`
}

// DependencyPolicy says what happens to a job waiting on a dependency that
// was discarded or cancelled.
type DependencyPolicy string

// Dependency policies.
const (
	// DependencyCancel cancels the waiting job (and, transitively, the jobs
	// waiting on it), recording which dependency ended it in LastError.
	DependencyCancel DependencyPolicy = "cancel"
	// DependencyWait keeps the waiting job pending for an operator: retrying
	// the failed dependency lets it continue once that completes.
	DependencyWait DependencyPolicy = "wait"
	// DependencyAny runs the waiting job once every dependency finished,
	// whatever its outcome: a discarded or cancelled dependency counts as
	// done. Batch callbacks wait this way.
	DependencyAny DependencyPolicy = "any"
)

// Valid reports whether p is one of the known policies.
func (p DependencyPolicy) Valid() bool {
	return p == DependencyCancel || p == DependencyWait || p == DependencyAny
}

// DependencyRow is one edge of a job graph: Child waits for Parent.
type DependencyRow struct {
	// Parent is the job waited for.
	Parent int64 `json:"parent"`
	// Child is the job that waits.
	Child int64 `json:"child"`
	// ParentState and ChildState are the jobs' states when read.
	ParentState JobState `json:"parent_state"`
	ChildState  JobState `json:"child_state"`
}
