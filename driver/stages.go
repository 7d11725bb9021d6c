package driver

import (
	"context"
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
