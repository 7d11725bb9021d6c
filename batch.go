package leasehold

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// BatchOutcome counts how the members of a batch finished. A batch
// callback's handler finds it in its arguments under the JSON key "batch":
// give the callback's args type a field
//
//	Batch leasehold.BatchOutcome `json:"batch"`
type BatchOutcome struct {
	// Members is the number of members.
	Members int `json:"members"`
	// Completed, Discarded and Cancelled count the members in each final
	// state when the callback's attempt began.
	Completed int `json:"completed"`
	Discarded int `json:"discarded"`
	Cancelled int `json:"cancelled"`
}

// BatchResult is the outcome of InsertBatch.
type BatchResult struct {
	// Members are the inserted members, in input order.
	Members []*InsertResult
	// Callback is the callback job, pending until every member finished.
	Callback *InsertResult
}

// batchMetadataKey marks a batch callback in its metadata.
const batchMetadataKey = "leasehold_batch_callback"

// InsertBatch inserts members and a callback job in one transaction. The
// callback waits in state pending until every member finished — completed,
// discarded or cancelled (DependencyAny) — and becomes available in the
// write that finishes the last one, whichever client writes it; its
// handler then gets the members' outcome counts in its args (BatchOutcome).
// A member still retrying, or stuck, holds the callback back. Members may
// have dependencies of their own on earlier members (DependsOnIndex counts
// from the first member).
func (c *Client[TTx]) InsertBatch(ctx context.Context, members []InsertManyParams, callback InsertManyParams) (*BatchResult, error) {
	return c.insertBatch(ctx, c.core.exec, members, callback)
}

// InsertBatchTx is InsertBatch inside the caller's transaction tx.
func (c *Client[TTx]) InsertBatchTx(ctx context.Context, tx TTx, members []InsertManyParams, callback InsertManyParams) (*BatchResult, error) {
	return c.insertBatch(ctx, c.driver.UnwrapExecutor(tx), members, callback)
}

func (c *Client[TTx]) insertBatch(ctx context.Context, exec driver.Executor, members []InsertManyParams, callback InsertManyParams) (*BatchResult, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: a batch needs at least one member", ErrInvalidArgs)
	}
	var opts InsertOpts
	if callback.InsertOpts != nil {
		opts = *callback.InsertOpts
	}
	if len(opts.DependsOn) > 0 || len(opts.DependsOnIndex) > 0 || opts.DependencyPolicy != "" {
		return nil, fmt.Errorf("%w: a batch callback depends on its members only", ErrInvalidArgs)
	}
	opts.DependsOnIndex = make([]int, len(members))
	for i := range members {
		opts.DependsOnIndex[i] = i
	}
	opts.DependencyPolicy = DependencyAny
	meta := make(map[string]any, len(opts.Metadata)+1)
	for k, v := range opts.Metadata {
		meta[k] = v
	}
	meta[batchMetadataKey] = true
	opts.Metadata = meta
	params := append(append(make([]InsertManyParams, 0, len(members)+1), members...), InsertManyParams{Args: callback.Args, InsertOpts: &opts})
	res, err := c.core.insertMany(ctx, exec, params, exec == c.core.exec)
	if err != nil {
		return nil, err
	}
	return &BatchResult{Members: res[:len(members)], Callback: res[len(members)]}, nil
}

// DependencyAny runs a waiting job once every dependency finished,
// whatever the outcome; batch callbacks wait this way.
const DependencyAny = leasetype.DependencyAny

// batchMarker is how batchMetadataKey appears in encoded metadata.
var batchMarker = []byte(`"` + batchMetadataKey + `"`)

// fillBatchOutcome sets the "batch" key of a batch callback's args to its
// members' outcome counts, before the handler decodes them. Other jobs
// pass untouched at the cost of one byte search of their metadata.
func (c *clientCore) fillBatchOutcome(ctx context.Context, row *leasetype.JobRow) error {
	if !bytes.Contains(row.Metadata, batchMarker) {
		return nil
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(row.Metadata, &meta); err != nil || string(meta[batchMetadataKey]) != "true" {
		return nil
	}
	se, ok := c.exec.(driver.StageExecutor)
	if !ok {
		return fmt.Errorf("leasehold: batch callback %d: driver does not record dependencies", row.ID)
	}
	edges, err := se.JobDependencies(ctx, &driver.JobDependenciesParams{JobID: row.ID})
	if err != nil {
		return fmt.Errorf("leasehold: batch callback %d: read members: %w", row.ID, err)
	}
	var out BatchOutcome
	for _, e := range edges {
		if e.Child != row.ID {
			continue
		}
		out.Members++
		switch e.ParentState {
		case leasetype.JobStateCompleted:
			out.Completed++
		case leasetype.JobStateDiscarded:
			out.Discarded++
		case leasetype.JobStateCancelled:
			out.Cancelled++
		}
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(row.EncodedArgs, &args); err != nil || args == nil {
		args = map[string]json.RawMessage{}
	}
	enc, err := json.Marshal(out)
	if err != nil {
		return err
	}
	args["batch"] = enc
	if row.EncodedArgs, err = json.Marshal(args); err != nil {
		return err
	}
	return nil
}
