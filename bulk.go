package leasehold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// BulkAction is what JobBulk does to every job that matches its filter.
type BulkAction string

// Bulk actions. None touches a running job, except BulkCancel, which asks
// for its cancellation as JobCancel does.
const (
	// BulkRetry makes the jobs available now with their error and expiry
	// counts reset, as JobRetry does (from scheduled, retryable, completed,
	// discarded, cancelled or stuck).
	BulkRetry BulkAction = "retry"
	// BulkDiscard discards waiting (available, scheduled, retryable) and
	// stuck jobs, as JobDiscard does.
	BulkDiscard BulkAction = "discard"
	// BulkCancel cancels waiting and stuck jobs at once and asks for the
	// cancellation of running ones, as JobCancel does.
	BulkCancel BulkAction = "cancel"
	// BulkDelete deletes jobs in any state but running. Their attempt rows
	// are kept until attempt retention removes them.
	BulkDelete BulkAction = "delete"
)

// DefaultBulkBatchSize is how many jobs one statement of JobBulk changes
// at most, so that a huge set never holds its locks for long.
const DefaultBulkBatchSize = 1000

// BulkParams selects the jobs of a bulk action. Zero filter fields do not
// filter.
type BulkParams struct {
	// Action is what to do.
	Action BulkAction
	// States keeps jobs in one of them; empty means every state the action
	// applies to. A state the action does not apply to is an error
	// (running, for anything but BulkCancel).
	States []leasetype.JobState
	// Queue keeps jobs of this queue.
	Queue string
	// Kind keeps jobs of this kind.
	Kind string
	// OlderThan, when positive, keeps jobs created more than OlderThan ago
	// on the database clock.
	OlderThan time.Duration
	// BatchSize is the most jobs changed per statement and transaction, 1
	// to 10,000; zero means DefaultBulkBatchSize.
	BatchSize int
	// Note, when not empty, becomes the jobs' last error (retry, discard,
	// cancel) and the audit entries' note.
	Note string
}

// BulkResult is what JobBulk did.
type BulkResult struct {
	// Action is the action taken.
	Action BulkAction `json:"action"`
	// Changed is how many jobs were changed (or deleted).
	Changed int64 `json:"changed"`
	// CancelRequested is how many running jobs were asked to cancel
	// (BulkCancel); they end cancelled when their workers act on it.
	CancelRequested int64 `json:"cancel_requested,omitempty"`
	// Conflicts are the jobs a retry skipped because another job holds
	// their unique key.
	Conflicts []int64 `json:"conflicts,omitempty"`
	// Batches is how many batches ran, each in its own transaction with
	// its audit entry.
	Batches int `json:"batches"`
}

// bulkFrom returns the states action applies to, and whether it asks
// running jobs to cancel.
func bulkFrom(action BulkAction) ([]leasetype.JobState, error) {
	switch action {
	case BulkRetry:
		return []leasetype.JobState{
			leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateCompleted,
			leasetype.JobStateDiscarded, leasetype.JobStateCancelled, leasetype.JobStateStuck,
		}, nil
	case BulkDiscard:
		return waitingOrStuck(), nil
	case BulkCancel:
		return append(waitingOrStuck(), leasetype.JobStateRunning), nil
	case BulkDelete:
		return driver.NotRunningStates(), nil
	}
	return nil, fmt.Errorf("%w: unknown bulk action %q (want retry, discard, cancel or delete)", ErrInvalidArgs, action)
}

// bulkStates returns the states JobBulk works on: p.States checked against
// the action's, or all of the action's.
func bulkStates(p *BulkParams) ([]leasetype.JobState, error) {
	from, err := bulkFrom(p.Action)
	if err != nil {
		return nil, err
	}
	if len(p.States) == 0 {
		return from, nil
	}
	var out []leasetype.JobState
	for _, s := range p.States {
		if !s.Valid() {
			return nil, fmt.Errorf("%w: unknown state %q", ErrInvalidArgs, s)
		}
		if !slices.Contains(from, s) {
			why := ""
			if s == leasetype.JobStateRunning {
				why = ": running jobs are never changed in bulk, only cancelled (their workers end them)"
			}
			return nil, fmt.Errorf("%w: cannot %s %s jobs (%s applies to %s)%s", ErrInvalidArgs, p.Action, s, p.Action, joinStates(from), why)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

func joinStates(states []leasetype.JobState) string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

func (p *BulkParams) check() (BulkParams, error) {
	q := BulkParams{}
	if p != nil {
		q = *p
	}
	if q.BatchSize == 0 {
		q.BatchSize = DefaultBulkBatchSize
	}
	if q.BatchSize < 1 || q.BatchSize > 10000 {
		return q, fmt.Errorf("%w: batch size %d is outside 1 to 10000", ErrInvalidArgs, q.BatchSize)
	}
	if q.OlderThan < 0 {
		return q, fmt.Errorf("%w: older-than %s is negative", ErrInvalidArgs, q.OlderThan)
	}
	states, err := bulkStates(&q)
	if err != nil {
		return q, err
	}
	q.States = states
	return q, nil
}

// describe is the filter as the audit entries show it.
func (p *BulkParams) describe() string {
	parts := []string{"state=" + joinStates(p.States)}
	if p.Queue != "" {
		parts = append(parts, "queue="+p.Queue)
	}
	if p.Kind != "" {
		parts = append(parts, "kind="+p.Kind)
	}
	if p.OlderThan > 0 {
		parts = append(parts, "older-than="+p.OlderThan.String())
	}
	return strings.Join(parts, " ")
}

// JobBulkCount counts the jobs JobBulk would act on with the same params:
// show it, and ask for confirmation, before acting.
func (c *Client[TTx]) JobBulkCount(ctx context.Context, params *BulkParams) (int64, error) {
	p, err := params.check()
	if err != nil {
		return 0, err
	}
	n, err := c.core.exec.JobCount(ctx, &driver.JobCountParams{JobFilter: driver.JobFilter{
		States: p.States, Queue: p.Queue, Kind: p.Kind, OlderThan: p.OlderThan,
	}})
	if err != nil {
		return 0, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return n, nil
}

// JobBulk applies an action to every job matching the filter, in batches
// of at most BatchSize jobs: each batch is one statement in a transaction
// with its audit entry (one entry per batch, with the jobs it changed and
// their count), so a huge set never holds its locks for long and an
// interrupted run leaves whole batches done. Jobs are taken in ID order;
// a job inserted meanwhile that matches is included. A retry that would
// give a job a unique key another job holds skips that job and reports it
// in Conflicts. Running jobs are never retried, discarded or deleted;
// BulkCancel asks for their cancellation, as JobCancel does. The actor is
// the one of ctx (WithActor).
func (c *Client[TTx]) JobBulk(ctx context.Context, params *BulkParams) (*BulkResult, error) {
	p, err := params.check()
	if err != nil {
		return nil, err
	}
	res := &BulkResult{Action: p.Action, Conflicts: []int64{}}
	states := slices.DeleteFunc(slices.Clone(p.States), func(s leasetype.JobState) bool { return s == leasetype.JobStateRunning })
	cancelRunning := len(states) < len(p.States)
	bp := &driver.JobBulkParams{
		JobFilter: driver.JobFilter{States: states, Queue: p.Queue, Kind: p.Kind, OlderThan: p.OlderThan},
		Limit:     p.BatchSize, Note: p.Note,
	}
	switch p.Action {
	case BulkRetry:
		bp.State, bp.ResetErrors = leasetype.JobStateAvailable, true
	case BulkDiscard:
		bp.State = leasetype.JobStateDiscarded
	case BulkCancel:
		bp.State = leasetype.JobStateCancelled
	case BulkDelete:
		bp.Delete = true
	}
	action := "bulk_" + string(p.Action)
	for len(states) > 0 {
		var batch *driver.JobBulkResult
		err := inTx(ctx, c.core.exec, func(x driver.Executor) error {
			var err error
			if batch, err = x.JobBulk(ctx, bp); err != nil {
				return err
			}
			if len(batch.IDs) == 0 && len(batch.Conflicts) == 0 && res.Batches > 0 {
				return nil // the last, empty batch of a run already audited
			}
			return c.core.auditBulk(ctx, x, action, &p, batch.IDs, batch.Conflicts)
		})
		if err != nil {
			return res, fmt.Errorf("leasehold: %s: %w", action, err)
		}
		res.Batches++
		res.Changed += int64(len(batch.IDs))
		res.Conflicts = append(res.Conflicts, batch.Conflicts...)
		if p.Action == BulkRetry && len(batch.IDs) > 0 && p.Queue != "" {
			c.core.wakeQueue(p.Queue)
		}
		if batch.Examined < bp.Limit {
			break
		}
		bp.AfterID = batch.LastID
	}
	if cancelRunning {
		n, err := c.core.bulkCancelRunning(ctx, &p)
		res.CancelRequested = n
		if err != nil {
			return res, fmt.Errorf("leasehold: bulk_cancel of running jobs: %w", err)
		}
	}
	return res, nil
}

// auditBulk records one batch of a bulk action.
func (c *clientCore) auditBulk(ctx context.Context, x driver.Executor, action string, p *BulkParams, ids, conflicts []int64) error {
	detail := p.describe()
	if len(conflicts) > 0 {
		detail += fmt.Sprintf("; skipped %d whose unique key another job holds: %s", len(conflicts), joinIDs(conflicts, 20))
	}
	_, err := x.AuditInsert(ctx, &driver.AuditInsertParams{
		Actor: auditActor(ctx), Action: action, Queue: p.Queue, JobIDs: ids, Count: int64(len(ids)), Note: p.Note, Detail: detail,
	})
	return err
}

// bulkCancelRunning asks for the cancellation of the running jobs matching
// p, a page of BatchSize at a time, with one audit entry per page.
func (c *clientCore) bulkCancelRunning(ctx context.Context, p *BulkParams) (int64, error) {
	var (
		total    int64
		beforeID int64
	)
	var cutoff time.Time
	if p.OlderThan > 0 {
		now, err := c.exec.Now(ctx)
		if err != nil {
			return 0, err
		}
		cutoff = now.Add(-p.OlderThan)
	}
	for {
		rows, err := c.exec.JobList(ctx, &driver.JobListParams{
			States: []leasetype.JobState{leasetype.JobStateRunning}, Queue: p.Queue, Kind: p.Kind, BeforeID: beforeID, Limit: p.BatchSize,
		})
		if err != nil || len(rows) == 0 {
			return total, err
		}
		var ids []int64
		err = inTx(ctx, c.exec, func(x driver.Executor) error {
			ids = ids[:0]
			for _, r := range rows {
				if !cutoff.IsZero() && !r.CreatedAt.Before(cutoff) {
					continue
				}
				_, running, err := x.JobCancelRunning(ctx, &driver.JobCancelRunningParams{ID: r.ID})
				if err != nil && !errors.Is(err, driver.ErrNotFound) {
					return err
				}
				if running {
					ids = append(ids, r.ID)
				}
			}
			if len(ids) == 0 {
				return nil
			}
			slices.Sort(ids)
			return c.auditBulk(ctx, x, "bulk_cancel_request", p, ids, nil)
		})
		if err != nil {
			return total, err
		}
		total += int64(len(ids))
		if len(rows) < p.BatchSize {
			return total, nil
		}
		beforeID = rows[len(rows)-1].ID
	}
}

// joinIDs lists up to max IDs, and how many more.
func joinIDs(ids []int64, max int) string {
	var b strings.Builder
	for i, id := range ids {
		if i == max {
			fmt.Fprintf(&b, " and %d more", len(ids)-max)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}
