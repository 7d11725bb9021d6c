package leasehold

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// actorKey is the context key of WithActor.
type actorKey struct{}

// UnknownActor is the actor recorded for an operator action whose context
// carries none (see WithActor).
const UnknownActor = "unknown"

// maxActorLen bounds an actor's length, in bytes, as the audit table does.
const maxActorLen = 200

// WithActor returns a context that names who takes the operator actions
// run with it, for the audit trail: JobRetry, JobCancel, JobDiscard,
// ResolveStuck, QueuePause, QueueResume and JobBulk record it with what
// they did. The dashboard passes its authenticated identity ("token",
// "basic:alice", "session"), the CLI "cli:$USER@host"; a library caller
// passes what identifies the person or system acting.
//
// The identity travels in the context, like a request ID, rather than as
// an argument: it belongs to the request being served, is set once where
// the request is authenticated, and reaches every operator method below
// it without changing their signatures. Without it the actor is recorded
// as UnknownActor.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom returns the actor set by WithActor, or "" when there is none.
func ActorFrom(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

// auditActor is the actor recorded for ctx: printable, at most maxActorLen
// bytes, UnknownActor when none was given.
func auditActor(ctx context.Context) string {
	a := strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return -1
		}
		return r
	}, strings.TrimSpace(ActorFrom(ctx)))
	if a == "" {
		return UnknownActor
	}
	for len(a) > maxActorLen {
		_, size := utf8.DecodeLastRuneInString(a)
		a = a[:len(a)-size]
	}
	return a
}

// AuditListParams filters AuditList. Zero fields do not filter.
type AuditListParams struct {
	// JobID keeps the entries about this job, its own and those of the bulk
	// batches that changed it.
	JobID int64
	// Queue keeps the entries about this queue.
	Queue string
	// Actor keeps the entries of this actor.
	Actor string
	// Since keeps the entries recorded at or after it (database clock).
	Since time.Time
	// BeforeID pages backwards: only entries with a smaller ID.
	BeforeID int64
	// Limit is the most entries returned, 1 to 10,000; default 100.
	Limit int
}

// AuditList returns the audit trail of operator actions, newest first.
func (c *Client[TTx]) AuditList(ctx context.Context, params *AuditListParams) ([]*leasetype.AuditRow, error) {
	p := AuditListParams{}
	if params != nil {
		p = *params
	}
	if p.Limit < 0 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: limit %d is outside 1 to 10000", ErrInvalidArgs, p.Limit)
	}
	rows, err := c.core.exec.AuditList(ctx, &driver.AuditListParams{
		JobID: p.JobID, Queue: p.Queue, Actor: p.Actor, Since: p.Since, BeforeID: p.BeforeID, Limit: p.Limit,
	})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return rows, nil
}

// inTx runs fn in a transaction on exec (a savepoint when exec is in one
// already) and commits it when fn succeeds: an operator action and its
// audit entry commit together or not at all.
func inTx(ctx context.Context, exec driver.Executor, fn func(x driver.Executor) error) error {
	tx, err := exec.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx) //nolint:errcheck // fn's error is the one to report
		return err
	}
	return tx.Commit(ctx)
}

// auditJob records a single-job action on x: count 1 when it changed the
// job, 0 with the reason when it was refused.
func auditJob(ctx context.Context, x driver.Executor, action string, row *leasetype.JobRow, changed bool, note string) error {
	if !changed && action == "cancel" && row.State == leasetype.JobStateRunning {
		return nil // JobCancel goes on to request the cancellation, recorded then
	}
	p := &driver.AuditInsertParams{Actor: auditActor(ctx), Action: action, Queue: row.Queue, JobID: row.ID, Note: note}
	if changed {
		p.Count = 1
		p.Detail = "now " + string(row.State)
	} else {
		p.Detail = "refused: the job is " + string(row.State)
	}
	if _, err := x.AuditInsert(ctx, p); err != nil {
		return err
	}
	return nil
}
