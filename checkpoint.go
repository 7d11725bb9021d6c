package leasehold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// MaxStageStateBytes is the largest JSON state a checkpoint stores (16 KiB):
// the state is a small resume point kept on the job row, not a result store.
const MaxStageStateBytes = driver.MaxStageStateBytes

// ErrNotInHandler is returned by Checkpoint and CheckpointTx when their
// context is not one a handler was given.
var ErrNotInHandler = errors.New("leasehold: not inside a handler (use the context the handler was given)")

// leaseContextKey holds the lease of the handler whose context it is.
type leaseContextKey struct{}

// leaseContext is the context a handler runs with: its parent, plus the
// lease, which Checkpoint needs (the job, its token, the client and its
// owner). It lives in the lease, so starting a handler allocates nothing
// for it.
type leaseContext struct {
	context.Context
	lease *lease
}

// Value implements context.Context.
func (c *leaseContext) Value(key any) any {
	if _, ok := key.(leaseContextKey); ok {
		return c.lease
	}
	return c.Context.Value(key)
}

// leaseFromContext returns the lease of the handler whose context ctx is.
func leaseFromContext(ctx context.Context) *lease {
	l, _ := ctx.Value(leaseContextKey{}).(*lease)
	return l
}

// Checkpoint records, from inside a handler, that the job finished stage
// and may resume after it with state (encoded as JSON; nil stores none).
// It is one conditional write fenced by the lease's token and this client's
// owner: it stores the stage on the job row (JobRow.Stage and StageState,
// which the next attempt sees), appends it to the job's stage history
// (Client.JobStages), and renews the lease as a heartbeat does. A holder
// that lost its lease gets a *LeaseLostError and nothing is written; it
// must stop, as for any refused write.
//
// ctx must be the handler's context (or derived from it). The state must
// marshal to at most MaxStageStateBytes of JSON; the stage name must be 1 to
// 128 bytes of UTF-8. See Stages for the usual way to write a staged handler.
func Checkpoint(ctx context.Context, stage string, state any) error {
	l := leaseFromContext(ctx)
	if l == nil {
		return ErrNotInHandler
	}
	return l.core.checkpoint(ctx, l, l.core.exec, stage, state, false)
}

// CheckpointTx is Checkpoint inside the caller's transaction tx, so that a
// business write and the stage it completes commit together or not at all.
// The write is fenced as Checkpoint's; on a *LeaseLostError the caller must
// roll back. The lease's renewal takes effect only when tx commits, so the
// local deadline is not moved (the heartbeater keeps renewing it).
//
// The checkpoint locks the job's row until tx ends, and the heartbeater's
// renewal of it waits for that: keep tx short. Where the driver can
// (driver.TxBounder: package postgres) the database aborts tx unless it
// commits within the lease's remaining time, as with CompleteTx. TTx must
// be the transaction type of the client running the handler.
func CheckpointTx[TTx any](ctx context.Context, tx TTx, stage string, state any) error {
	l := leaseFromContext(ctx)
	if l == nil {
		return ErrNotInHandler
	}
	c, ok := l.core.client.(*Client[TTx])
	if !ok {
		return fmt.Errorf("%w: CheckpointTx: transaction type %T is not the client's (%T)", ErrInvalidArgs, tx, l.core.client)
	}
	return l.core.checkpoint(ctx, l, c.driver.UnwrapExecutor(tx), stage, state, true)
}

// encodeStage validates a checkpoint's stage name and encodes its state.
func encodeStage(stage string, state any) ([]byte, error) {
	switch {
	case stage == "":
		return nil, fmt.Errorf("%w: checkpoint: empty stage name", ErrInvalidArgs)
	case len(stage) > driver.MaxStageNameBytes:
		return nil, fmt.Errorf("%w: checkpoint: stage name is %d bytes, the limit is %d", ErrInvalidArgs, len(stage), driver.MaxStageNameBytes)
	case !utf8.ValidString(stage):
		return nil, fmt.Errorf("%w: checkpoint: stage name is not valid UTF-8", ErrInvalidArgs)
	}
	if state == nil {
		return nil, nil
	}
	var data []byte
	switch v := state.(type) {
	case json.RawMessage:
		data = v
	default:
		var err error
		if data, err = json.Marshal(state); err != nil {
			return nil, fmt.Errorf("%w: checkpoint %q: state does not encode as JSON: %v", ErrInvalidArgs, stage, err)
		}
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%w: checkpoint %q: state is not valid JSON", ErrInvalidArgs, stage)
	}
	if len(data) > MaxStageStateBytes {
		return nil, fmt.Errorf("%w: checkpoint %q: state is %d bytes of JSON, the limit is %d (MaxStageStateBytes): keep large results in your own tables", ErrInvalidArgs, stage, len(data), MaxStageStateBytes)
	}
	if bytes.Equal(data, []byte("null")) {
		return nil, nil
	}
	return data, nil
}

// checkpoint writes a stage checkpoint of lease l on exec; inTx says exec
// runs in the caller's transaction.
func (c *clientCore) checkpoint(ctx context.Context, l *lease, exec driver.Executor, stage string, state any, inTx bool) error {
	data, err := encodeStage(stage, state)
	if err != nil {
		return err
	}
	se, ok := exec.(driver.StageExecutor)
	if !ok {
		return fmt.Errorf("leasehold: checkpoint: driver executor %T does not record stages", exec)
	}
	if l.completing.Load() {
		return fmt.Errorf("%w: checkpoint %q after CompleteTx", ErrInvalidArgs, stage)
	}
	params := &driver.JobCheckpointParams{
		ID: l.row.ID, Token: l.token, Owner: c.owner, TTL: l.ttl, Stage: stage, State: data,
	}
	if inTx {
		deadline, _ := l.times()
		params.TxBound = max(time.Until(deadline), minTxBound)
	}
	sentAt := time.Now()
	written, err := se.JobCheckpoint(ctx, params)
	if err != nil {
		return fmt.Errorf("leasehold: checkpoint job %d stage %q: %w", l.row.ID, stage, err)
	}
	if !written {
		c.stats.fencedWrites.Add(1)
		lle := &LeaseLostError{JobID: l.row.ID, Token: l.token, Reason: "checkpoint refused: the fencing token is no longer current, the lease owner changed or the lease expired"}
		l.lose(lle.Reason)
		return lle
	}
	if !inTx {
		// The write renewed the lease on the database, as a heartbeat.
		l.renewed(sentAt)
	}
	l.row.Stage, l.row.StageState = stage, data
	return nil
}

// JobStages returns the stage history of job id, oldest first: every
// checkpoint written on it, with the attempt and token that wrote it.
func (c *Client[TTx]) JobStages(ctx context.Context, id int64) ([]*leasetype.StageRow, error) {
	se, ok := c.core.exec.(driver.StageExecutor)
	if !ok {
		return nil, fmt.Errorf("leasehold: driver %s does not record stages", c.driver.Name())
	}
	rows, err := se.JobStages(ctx, &driver.JobStagesParams{JobID: id})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err)
	}
	return rows, nil
}

// DecodeStageState decodes the state of the job's last checkpoint into v.
// It returns false, and leaves v alone, when the job has no checkpointed
// state.
func (j *Job[T]) DecodeStageState(v any) (bool, error) {
	return decodeStageState(j.JobRow, v)
}

// StageStateOf returns the state of row's last checkpoint decoded as S; the
// zero S when there is none.
func StageStateOf[S any](row *leasetype.JobRow) (S, error) {
	var s S
	_, err := decodeStageState(row, &s)
	return s, err
}

func decodeStageState(row *leasetype.JobRow, v any) (bool, error) {
	if row == nil || len(row.StageState) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(row.StageState, v); err != nil {
		return false, fmt.Errorf("leasehold: decode state of stage %q of job %d: %w", row.Stage, row.ID, err)
	}
	return true, nil
}
