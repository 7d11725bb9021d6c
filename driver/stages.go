package driver

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// StageExecutor is implemented by executors that record fenced stage
// checkpoints (every backend of this module does). The client finds it by
// type assertion on an Executor.
type StageExecutor interface {
	// JobCheckpoint records a stage on a running job in one conditional
	// write: only while Token is the job's current token, Owner its lease
	// owner, the job running and its lease unexpired on the database clock.
	// It sets the job's Stage and StageState, appends a row to the stage
	// history, and renews the lease as JobHeartbeat does (LeaseUntil = now
	// + TTL, HeartbeatAt = now, Heartbeats + 1). It reports whether it
	// wrote; false means the lease was lost and nothing was written. In a
	// caller's transaction with TxBound set, a TxBounder driver first bounds
	// the transaction as JobFinish does.
	JobCheckpoint(ctx context.Context, params *JobCheckpointParams) (bool, error)
	// JobStages returns the stage history of job JobID, oldest first.
	JobStages(ctx context.Context, params *JobStagesParams) ([]*leasetype.StageRow, error)
	// JobDependencies returns the edges where job JobID is parent or child,
	// with both jobs' states, parents first.
	JobDependencies(ctx context.Context, params *JobDependenciesParams) ([]*leasetype.DependencyRow, error)
}

// JobCheckpointParams is one stage checkpoint.
type JobCheckpointParams struct {
	// ID is the job's.
	ID int64
	// Token is the fencing token the caller holds.
	Token int64
	// Owner is the caller's lease owner.
	Owner string
	// TTL is the lease's new duration from now.
	TTL time.Duration
	// Stage names the stage completed; not empty.
	Stage string
	// State is the stage's JSON state; nil stores none.
	State []byte
	// TxBound is as in JobFinishParams.
	TxBound time.Duration
}

// JobStagesParams selects the job whose stage history JobStages returns.
type JobStagesParams struct {
	// JobID is the job's ID.
	JobID int64
}

// JobDependenciesParams selects the job whose edges JobDependencies returns.
type JobDependenciesParams struct {
	// JobID is the job's ID.
	JobID int64
}

// MaxStageStateBytes is the largest stage state a checkpoint stores: the
// state is a small resume point on the hot job row, not a result store.
const MaxStageStateBytes = 16 << 10

// MaxStageNameBytes is the longest stage name.
const MaxStageNameBytes = 128

// Dependencies. A job inserted (JobInsertMany) with DependsOn or
// DependsOnIndex waits in state pending until every dependency completed;
// the statement that completes the last one (whatever writes it: JobFinish,
// an operator's JobSetState, a bulk action) makes it available, or
// scheduled when its ScheduledAt is in the future, and wakes its queue's
// listeners. A dependency that is already completed at insert does not
// count. When a dependency is discarded or cancelled, a waiting job with
// DependencyCancel is cancelled in the same statement (LastError names the
// dependency), and so, transitively, are the jobs waiting on it; a
// dependency moved out of discarded or cancelled again (retried) puts the
// jobs it cancelled back to pending. A job with DependencyWait stays
// pending. An unknown dependency ID is an error wrapping ErrNotFound, and
// nothing is inserted. A job that was UniqueSkipped gets no edges.
//
// Cycles cannot be made: a job's dependencies are set once, at its insert,
// and name jobs that exist already or come earlier in the same call, so
// every edge runs from an older job to a newer one. DependsOnIndex must
// therefore point backwards; a forward or self index is an error.

// ValidateDependencies checks the DependsOnIndex of every job of a
// JobInsertMany call: each must name an earlier position.
func ValidateDependencies(jobs []*JobInsertParams) error {
	for i, p := range jobs {
		for _, idx := range p.DependsOnIndex {
			if idx < 0 || idx >= i {
				return fmt.Errorf("job %d of the batch depends on position %d: a job may depend only on jobs inserted before it (which also rules out cycles)", i, idx)
			}
		}
		for _, id := range p.DependsOn {
			if id <= 0 {
				return fmt.Errorf("job %d of the batch depends on job ID %d: not a job ID", i, id)
			}
		}
		if p.DependencyPolicy != "" && !p.DependencyPolicy.Valid() {
			return fmt.Errorf("job %d of the batch: unknown dependency policy %q", i, p.DependencyPolicy)
		}
	}
	return nil
}

// HasDependencies reports whether any job of a batch has dependencies.
func HasDependencies(jobs []*JobInsertParams) bool {
	for _, p := range jobs {
		if len(p.DependsOn) > 0 || len(p.DependsOnIndex) > 0 {
			return true
		}
	}
	return false
}

// DependencyParents returns the distinct parent IDs of job i of a batch
// whose earlier results are results, in ascending order.
func DependencyParents(p *JobInsertParams, results []*JobInsertResult) []int64 {
	ids := append([]int64(nil), p.DependsOn...)
	for _, idx := range p.DependsOnIndex {
		ids = append(ids, results[idx].Job.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// DependencyPolicyOf returns p's policy, DependencyCancel when empty.
func DependencyPolicyOf(p *JobInsertParams) leasetype.DependencyPolicy {
	if p.DependencyPolicy == "" {
		return leasetype.DependencyCancel
	}
	return p.DependencyPolicy
}

// DependencyOutcome is what a new job's parents' states make of it.
type DependencyOutcome struct {
	// Waiting counts the parents not completed.
	Waiting int
	// FailedParent is a discarded or cancelled parent, 0 when none.
	FailedParent int64
	// FailedState is that parent's state.
	FailedState leasetype.JobState
}

// Cancelled reports whether the new job is cancelled at insert under policy.
func (o DependencyOutcome) Cancelled(policy leasetype.DependencyPolicy) bool {
	return o.FailedParent != 0 && policy == leasetype.DependencyCancel
}

// CancelNote is the LastError of a job cancelled by its dependency.
func (o DependencyOutcome) CancelNote() string {
	return fmt.Sprintf("cancelled: dependency %d was %s", o.FailedParent, o.FailedState)
}

// EdgeSatisfied reports whether a parent in state no longer holds back a
// child with policy: it completed, or, for DependencyAny, it finished
// discarded or cancelled.
func EdgeSatisfied(state leasetype.JobState, policy leasetype.DependencyPolicy) bool {
	return state == leasetype.JobStateCompleted ||
		policy == leasetype.DependencyAny && (state == leasetype.JobStateDiscarded || state == leasetype.JobStateCancelled)
}

// EvaluateDependencies computes the outcome of parents' states (by ID) for
// a child with policy; it returns an error wrapping ErrNotFound for a
// parent missing from states.
func EvaluateDependencies(parents []int64, states map[int64]leasetype.JobState, policy leasetype.DependencyPolicy) (DependencyOutcome, error) {
	var o DependencyOutcome
	for _, id := range parents {
		st, ok := states[id]
		switch {
		case !ok:
			return o, fmt.Errorf("dependency %d: %w", id, ErrNotFound)
		case EdgeSatisfied(st, policy):
		default:
			o.Waiting++
			if (st == leasetype.JobStateDiscarded || st == leasetype.JobStateCancelled) && o.FailedParent == 0 {
				o.FailedParent, o.FailedState = id, st
			}
		}
	}
	return o, nil
}
