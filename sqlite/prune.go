package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// jobPruneSQL deletes up to ?3 finished jobs in one of the states of the
// JSON array ?1 finalized before the database clock minus ?2 microseconds,
// oldest first. It walks the partial finalized index in finalized_at
// order: left to itself the planner picks the (state, queue) index and sorts
// every finished job, which retention on a large table cannot afford. The
// first state list is that index's predicate, which INDEXED BY requires;
// stuck jobs, which wait for reconciliation, are never pruned.
const jobPruneSQL = `DELETE FROM leasehold_job WHERE id IN (
	SELECT id FROM leasehold_job INDEXED BY leasehold_job_finalized_idx
	WHERE state IN ('completed', 'discarded', 'cancelled')
		AND state IN (SELECT value FROM json_each(?1))
		AND finalized_at < ` + nowExpr + ` - ?2
	ORDER BY finalized_at
	LIMIT ?3)`

// attemptPruneSQL deletes up to ?2 attempt rows that finished before the
// database clock minus ?1 microseconds, oldest first, by the finished_at
// index. The table has no rowid (migration 11): the rows are picked by key.
const attemptPruneSQL = `DELETE FROM leasehold_attempt WHERE (job_id, token) IN (
	SELECT job_id, token FROM leasehold_attempt
	WHERE finished_at < ` + nowExpr + ` - ?1
	ORDER BY finished_at
	LIMIT ?2)`

// JobPrune deletes up to params.Limit finished jobs of params.States whose
// FinalizedAt is more than params.OlderThan before the database clock. A
// Limit below one deletes nothing, as on the other backends.
func (e *executor) JobPrune(ctx context.Context, params *driver.JobPruneParams) (int64, error) {
	if params.Limit < 1 || len(params.States) == 0 {
		return 0, nil
	}
	states := make([]string, len(params.States))
	for i, s := range params.States {
		states[i] = string(s)
	}
	statesJSON, err := jsonStrings(states)
	if err != nil {
		return 0, fmt.Errorf("prune jobs: encode states: %w", err)
	}
	n, err := e.deleteCount(ctx, jobPruneSQL, statesJSON, olderThan(params.OlderThan), params.Limit)
	if err != nil {
		return 0, fmt.Errorf("prune jobs: %w", err)
	}
	return n, nil
}

// AttemptPrune deletes up to params.Limit attempt rows that finished more
// than params.OlderThan before the database clock. A Limit below one deletes
// nothing.
func (e *executor) AttemptPrune(ctx context.Context, params *driver.AttemptPruneParams) (int64, error) {
	if params.Limit < 1 {
		return 0, nil
	}
	n, err := e.deleteCount(ctx, attemptPruneSQL, olderThan(params.OlderThan), params.Limit)
	if err != nil {
		return 0, fmt.Errorf("prune attempts: %w", err)
	}
	return n, nil
}

// deleteCount runs a DELETE in a write and returns the rows it deleted.
func (e *executor) deleteCount(ctx context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := e.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, query, args...)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// olderThan is a retention age in microseconds, never negative.
func olderThan(d time.Duration) int64 { return max(0, d.Microseconds()) }
