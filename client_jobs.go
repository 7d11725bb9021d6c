package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// CompleteTx completes a job inside the caller's transaction, fenced by the
// job's lease token and this client's lease owner: the business writes in
// tx and the completion commit together or not at all. It returns a
// *LeaseLostError, and writes nothing, when the caller no longer holds the
// lease; the caller must then roll back. Call it from the handler with the
// job it was given; the handler should return nil after the commit.
//
// A handler that returns nil after CompleteTx costs no other write: the
// client sends no outcome for the job and frees its worker slot at once,
// and confirms the commit with one read of the attempt history for many
// such jobs (see package documentation, Guarantees); the job counts as
// completed, and its event is sent, once confirmed. Should tx have rolled
// back, the job is failed with that reason and retried. A handler that
// returns an error after CompleteTx has its outcome written as usual: the
// write is refused if tx committed, and the completion is then read back
// and counted as an ambiguous commit (Stats.AmbiguousCommits).
//
// The completion locks the job's row until tx ends, and the lease is not
// renewed meanwhile (the renewal would wait on that lock). Where the driver
// can (driver.TxBounder: package postgres), CompleteTx therefore bounds tx
// on the database to the lease's remaining time by the local deadline (at
// least minTxBound): a transaction that is not committed by then is aborted
// by the server, its row lock freed, and the job is reclaimed when its
// lease expires. Elsewhere the row lock keeps every other holder out until
// tx ends (see the backend's package documentation).
func (c *Client[TTx]) CompleteTx(ctx context.Context, tx TTx, job *leasetype.JobRow) error {
	if job == nil {
		return fmt.Errorf("%w: job is nil", ErrInvalidArgs)
	}
	l := c.core.leases.get(job.ID, job.LeaseToken)
	if l != nil && !l.sameClaim(job) {
		// job is of a lease the database forgot and granted again to this
		// client with the same token: the write would pass as the new one's.
		c.core.stats.fencedWrites.Add(1)
		return &LeaseLostError{JobID: job.ID, Token: job.LeaseToken, Reason: "completion refused: the database granted this job to this client again (a failover rolled it back)"}
	}
	bound := c.core.leaseTTL(job, c.core.workers[job.Kind])
	if l != nil {
		deadline, _ := l.times()
		bound = max(time.Until(deadline), minTxBound)
		// The completion locks the row until tx ends: stop renewing it, so
		// the heartbeat statement never waits on the caller's transaction.
		l.startCompleting(time.Now().Add(bound))
	}
	written, err := c.driver.UnwrapExecutor(tx).JobFinish(ctx, &driver.JobFinishParams{
		Owner:   c.core.owner,
		TxBound: bound,
		Items: []*driver.JobFinish{{
			ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted,
		}},
	})
	if err != nil {
		if l != nil {
			l.completedTx.Store(false)
			l.completing.Store(false)
		}
		return fmt.Errorf("leasehold: complete job %d: %w", job.ID, err)
	}
	if len(written) == 0 {
		c.core.stats.fencedWrites.Add(1)
		lle := &LeaseLostError{JobID: job.ID, Token: job.LeaseToken, Reason: "completion refused: the fencing token is no longer current, the lease owner changed or the lease expired"}
		if l != nil {
			l.lose(lle.Reason)
		}
		return lle
	}
	if l != nil {
		// The handler returning nil now needs no outcome write: the
		// client confirms the commit instead (txConfirmer).
		l.completedTx.Store(true)
	}
	return nil
}

// minTxBound is the least time CompleteTx leaves the caller's transaction
// to commit, even when the local deadline is nearer: enough for a COMMIT's
// round trip. The completion itself is fenced on the database clock.
const minTxBound = 100 * time.Millisecond

// Ping checks that the database answers, by reading its clock: the
// cheapest round trip, for health checks.
func (c *Client[TTx]) Ping(ctx context.Context) error {
	if _, err := c.Now(ctx); err != nil {
		return err
	}
	return nil
}

// Now returns the database clock, the one every lease is measured on: use
// it, not the local clock, to show how long a lease has left.
func (c *Client[TTx]) Now(ctx context.Context) (time.Time, error) {
	now, err := c.core.exec.Now(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("leasehold: read database clock: %w", err)
	}
	return now, nil
}

// JobGet returns a job by ID, or ErrNotFound.
func (c *Client[TTx]) JobGet(ctx context.Context, id int64) (*leasetype.JobRow, error) {
	row, err := c.core.exec.JobGet(ctx, &driver.JobGetParams{ID: id})
	if errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("%w: id %d", ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return row, nil
}

// JobListParams filters JobList. Zero fields do not filter.
type JobListParams struct {
	// States keeps jobs in any of these states.
	States []leasetype.JobState
	// Queue keeps jobs of this queue.
	Queue string
	// Kind keeps jobs of this kind.
	Kind string
	// UniqueKey keeps jobs with this unique key.
	UniqueKey string
	// Key keeps jobs with this flow-control key (InsertOpts.Key).
	Key string
	// Sequence keeps jobs with this sequence key (InsertOpts.Sequence).
	Sequence string
	// BeforeID pages backwards: only jobs with a smaller ID.
	BeforeID int64
	// Limit is the most jobs returned, 1 to 10,000; default 100.
	Limit int
}

// JobList lists jobs, newest first.
func (c *Client[TTx]) JobList(ctx context.Context, params *JobListParams) ([]*leasetype.JobRow, error) {
	p := JobListParams{}
	if params != nil {
		p = *params
	}
	if p.Limit < 0 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: limit %d is outside 1 to 10000", ErrInvalidArgs, p.Limit)
	}
	for _, s := range p.States {
		if !s.Valid() {
			return nil, fmt.Errorf("%w: unknown state %q", ErrInvalidArgs, s)
		}
	}
	rows, err := c.core.exec.JobList(ctx, &driver.JobListParams{
		States: p.States, Queue: p.Queue, Kind: p.Kind, UniqueKey: p.UniqueKey, Key: p.Key, Sequence: p.Sequence, BeforeID: p.BeforeID, Limit: p.Limit,
	})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return rows, nil
}

// JobAttempts returns a job's attempt history, oldest first: one row per
// lease that has ended. A lease still held is on the job row.
func (c *Client[TTx]) JobAttempts(ctx context.Context, id int64) ([]*leasetype.AttemptRow, error) {
	if _, err := c.JobGet(ctx, id); err != nil {
		return nil, err
	}
	rows, err := c.core.exec.JobAttempts(ctx, &driver.JobAttemptsParams{JobID: id})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return rows, nil
}

// JobRetry makes a job that is not running available now, with its error
// and expiry counts reset: a discarded, cancelled, completed, stuck,
// retryable or scheduled job runs again.
func (c *Client[TTx]) JobRetry(ctx context.Context, id int64) (*leasetype.JobRow, error) {
	return c.core.setState(ctx, c.core.exec, "retry", &driver.JobSetStateParams{
		ID: id, State: leasetype.JobStateAvailable, ResetErrors: true,
		FromStates: []leasetype.JobState{
			leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateCompleted,
			leasetype.JobStateDiscarded, leasetype.JobStateCancelled, leasetype.JobStateStuck,
		},
	})
}

// JobCancel cancels a job. A waiting (available, scheduled, retryable) or
// stuck job becomes cancelled at once. A running job gets a cancellation
// request: the client holding its lease cancels the handler's context
// (context.Cause is ErrJobCancelled) within its CancelCheckInterval, the
// attempt is recorded as cancelled and the job never runs again — unless
// the handler completes it first, or returns Permanent, which stand. The
// returned row is then still running, with CancelRequestedAt set. A
// finished job returns ErrJobState.
func (c *Client[TTx]) JobCancel(ctx context.Context, id int64) (*leasetype.JobRow, error) {
	// The job may move between running and waiting while we look; a few
	// rounds settle it.
	for range 3 {
		row, err := c.core.setState(ctx, c.core.exec, "cancel", &driver.JobSetStateParams{ID: id, State: leasetype.JobStateCancelled, FromStates: waitingOrStuck()})
		if err == nil || !errors.Is(err, ErrJobState) || row == nil || row.State != leasetype.JobStateRunning {
			return row, err
		}
		var running bool
		err = inTx(ctx, c.core.exec, func(x driver.Executor) error {
			var err error
			if row, running, err = x.JobCancelRunning(ctx, &driver.JobCancelRunningParams{ID: id}); err != nil || !running {
				return err
			}
			return auditJob(ctx, x, "cancel_request", row, true, "")
		})
		if errors.Is(err, driver.ErrNotFound) {
			return nil, fmt.Errorf("%w: id %d", ErrNotFound, id)
		}
		if err != nil {
			return nil, fmt.Errorf("leasehold: cancel running job %d: %w", id, err)
		}
		if running {
			return row, nil
		}
	}
	return nil, fmt.Errorf("%w: cannot cancel job %d: its state keeps changing", ErrJobState, id)
}

// JobDiscard discards a job that is waiting or stuck.
func (c *Client[TTx]) JobDiscard(ctx context.Context, id int64) (*leasetype.JobRow, error) {
	return c.core.setState(ctx, c.core.exec, "discard", &driver.JobSetStateParams{ID: id, State: leasetype.JobStateDiscarded, FromStates: waitingOrStuck()})
}

// Resolution is how a stuck job is settled.
type Resolution string

// Resolutions of a stuck job.
const (
	// ResolveSucceeded: the work happened; the job becomes completed.
	ResolveSucceeded Resolution = "succeeded"
	// ResolveFailed: the work did not happen and must not; the job is discarded.
	ResolveFailed Resolution = "failed"
	// ResolveRetry: the work did not happen and may run; the job is available again.
	ResolveRetry Resolution = "retry"
)

// ResolveStuck settles a stuck job after reconciliation; note says why and
// is kept as the job's last error.
func (c *Client[TTx]) ResolveStuck(ctx context.Context, id int64, as Resolution, note string) (*leasetype.JobRow, error) {
	p, err := resolveParams(id, as, note)
	if err != nil {
		return nil, err
	}
	return c.core.setState(ctx, c.core.exec, "resolve", p)
}

// ResolveStuckTx is ResolveStuck inside the caller's transaction, so that a
// reconciler's business write (the payment settled) and the job's
// resolution commit together or not at all. It returns ErrJobState when the
// job is no longer stuck (another reconciler got there first).
func (c *Client[TTx]) ResolveStuckTx(ctx context.Context, tx TTx, id int64, as Resolution, note string) (*leasetype.JobRow, error) {
	p, err := resolveParams(id, as, note)
	if err != nil {
		return nil, err
	}
	return c.core.setState(ctx, c.driver.UnwrapExecutor(tx), "resolve", p)
}

func resolveParams(id int64, as Resolution, note string) (*driver.JobSetStateParams, error) {
	p := &driver.JobSetStateParams{ID: id, FromStates: []leasetype.JobState{leasetype.JobStateStuck}, Note: note}
	switch as {
	case ResolveSucceeded:
		p.State = leasetype.JobStateCompleted
	case ResolveFailed:
		p.State = leasetype.JobStateDiscarded
	case ResolveRetry:
		p.State, p.ResetErrors = leasetype.JobStateAvailable, true
	default:
		return nil, fmt.Errorf("%w: unknown resolution %q (want succeeded, failed or retry)", ErrInvalidArgs, as)
	}
	return p, nil
}

// JobCounts counts jobs per queue and state.
func (c *Client[TTx]) JobCounts(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	counts, err := c.core.exec.JobCountByState(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return counts, nil
}

// auditAction names a state change in the audit trail: the action, and
// for a resolution its outcome ("resolve_failed").
func auditAction(action string, p *driver.JobSetStateParams) string {
	if action != "resolve" {
		return action
	}
	switch {
	case p.State == leasetype.JobStateCompleted:
		return "resolve_succeeded"
	case p.State == leasetype.JobStateDiscarded:
		return "resolve_failed"
	}
	return "resolve_retry"
}

// waitingOrStuck are the states an operator may cancel or discard a job in
// (pending: waiting for dependencies).
func waitingOrStuck() []leasetype.JobState {
	return []leasetype.JobState{leasetype.JobStatePending, leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable, leasetype.JobStateStuck}
}

func (c *clientCore) setState(ctx context.Context, exec driver.Executor, action string, p *driver.JobSetStateParams) (*leasetype.JobRow, error) {
	var (
		row     *leasetype.JobRow
		changed bool
	)
	// The change and its audit entry in one transaction (a savepoint in
	// the caller's, for ResolveStuckTx).
	err := inTx(ctx, exec, func(x driver.Executor) error {
		var err error
		row, changed, err = x.JobSetState(ctx, p)
		if err != nil {
			return err
		}
		return auditJob(ctx, x, auditAction(action, p), row, changed, p.Note)
	})
	if errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("%w: id %d", ErrNotFound, p.ID)
	}
	if errors.Is(err, driver.ErrUniqueConflict) {
		return nil, fmt.Errorf("%w: cannot %s job %d: another job holds its unique key", ErrUniqueConflict, action, p.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("leasehold: %s job %d: %w", action, p.ID, err)
	}
	if !changed {
		return row, fmt.Errorf("%w: cannot %s job %d: it is %s", ErrJobState, action, p.ID, row.State)
	}
	if row.State == leasetype.JobStateAvailable {
		c.wakeQueue(row.Queue)
	}
	return row, nil
}

// JobThroughput counts the attempts that ended since the given time, per
// queue, minute and outcome, oldest minute first: completions, failures and
// lease expiries over time.
func (c *Client[TTx]) JobThroughput(ctx context.Context, since time.Time) ([]*leasetype.ThroughputCount, error) {
	counts, err := c.core.exec.JobThroughput(ctx, &driver.JobThroughputParams{Since: since})
	if err != nil {
		return nil, fmt.Errorf("leasehold: count throughput: %w", err)
	}
	return counts, nil
}

// QueueBacklog returns the backlog of every queue with claimable jobs,
// measured on the database clock.
func (c *Client[TTx]) QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error) {
	backlog, err := c.core.exec.QueueBacklog(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	return backlog, nil
}

// SequencesBlockedParams filters SequencesBlocked. Zero fields do not filter.
type SequencesBlockedParams struct {
	// Queue keeps the sequences whose blocking job is in this queue.
	Queue string
	// Limit is the most rows returned, 1 to 10,000; default 100.
	Limit int
}

// SequencesBlocked lists the sequences held up by a job that will not run
// again by itself: the oldest job of the sequence that is not completed is
// discarded, cancelled or stuck, and later jobs wait. Under SequenceBlock
// they wait until an operator retries or deletes that job (under
// SequenceContinue only a stuck one holds them).
func (c *Client[TTx]) SequencesBlocked(ctx context.Context, params *SequencesBlockedParams) ([]*driver.SequenceBlockedRow, error) {
	p := SequencesBlockedParams{}
	if params != nil {
		p = *params
	}
	if p.Limit < 0 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: limit %d is outside 1 to 10000", ErrInvalidArgs, p.Limit)
	}
	rows, err := c.core.exec.SequenceBlocked(ctx, &driver.SequenceBlockedParams{Queue: p.Queue, Limit: p.Limit})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err)
	}
	return rows, nil
}

// KeyStatsParams filters KeyStats. Zero fields do not filter.
type KeyStatsParams struct {
	// Queue keeps the keys of jobs in this queue.
	Queue string
	// Limit is the most top keys returned, 1 to 10,000; default 20.
	Limit int
}

// KeyStats reports the flow-control keys (InsertOpts.Key, WorkerOpts.KeyBy)
// of unfinished jobs: the top keys by waiting jobs, each with its waiting
// and running counts, and per queue how many distinct keys have waiting
// jobs and how those jobs spread over them (a histogram whose buckets are
// driver.KeyWaitingBounds). The summary's size does not grow with the
// number of keys; computing it reads every unfinished keyed job.
func (c *Client[TTx]) KeyStats(ctx context.Context, params *KeyStatsParams) (*driver.KeyStatsResult, error) {
	p := KeyStatsParams{}
	if params != nil {
		p = *params
	}
	if p.Limit < 0 || p.Limit > 10000 {
		return nil, fmt.Errorf("%w: limit %d is outside 1 to 10000", ErrInvalidArgs, p.Limit)
	}
	res, err := c.core.exec.KeyStats(ctx, &driver.KeyStatsParams{Queue: p.Queue, Limit: p.Limit})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err)
	}
	return res, nil
}
