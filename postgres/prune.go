package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// jobPruneSQL deletes up to $3 jobs in states $1 finalized more than $2
// microseconds ago, oldest first. The fixed state list restricts the
// deletion to finished jobs whatever the caller passes, and lets the planner
// use the partial retention index. SKIP LOCKED lets concurrent pruners take
// different rows instead of waiting on each other. A deleted completed job's
// lease, which its row held, goes into the attempt log in the same
// statement (migration 12's delete trigger).
const jobPruneSQL = `
DELETE FROM leasehold_job
WHERE id IN (
	SELECT id FROM leasehold_job
	WHERE state IN ('completed', 'discarded', 'cancelled')
		AND state = ANY($1::text[])
		AND finalized_at < now() - $2::bigint * interval '1 microsecond'
	ORDER BY finalized_at
	LIMIT $3
	FOR UPDATE SKIP LOCKED
)`

// attemptPruneSQL deletes up to $2 attempt rows that finished more than $1
// microseconds ago, oldest first, through the finished_at index; the
// primary key picks the rows out. It prunes the log: a completed job's
// lease that its row holds (migration 12) goes with the job, or into the
// log when the job is deleted, and is pruned from there.
const attemptPruneSQL = `
DELETE FROM leasehold_attempt_log a
USING (
	SELECT job_id, token FROM leasehold_attempt_log
	WHERE finished_at < now() - $1::bigint * interval '1 microsecond'
	ORDER BY finished_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
) AS doomed
WHERE a.job_id = doomed.job_id AND a.token = doomed.token`

func (e *executor) JobPrune(ctx context.Context, params *driver.JobPruneParams) (int64, error) {
	if params.Limit < 1 || len(params.States) == 0 {
		return 0, nil
	}
	states := make([]string, len(params.States))
	for i, s := range params.States {
		states[i] = string(s)
	}
	tag, err := e.db.Exec(ctx, jobPruneSQL, states, micros(params.OlderThan), params.Limit)
	if err != nil {
		return 0, fmt.Errorf("prune jobs: %w", translateError(err))
	}
	return tag.RowsAffected(), nil
}

func (e *executor) AttemptPrune(ctx context.Context, params *driver.AttemptPruneParams) (int64, error) {
	if params.Limit < 1 {
		return 0, nil
	}
	tag, err := e.db.Exec(ctx, attemptPruneSQL, micros(params.OlderThan), params.Limit)
	if err != nil {
		return 0, fmt.Errorf("prune attempts: %w", translateError(err))
	}
	return tag.RowsAffected(), nil
}

// micros is d in whole microseconds, the precision of timestamptz.
func micros(d time.Duration) int64 { return d.Microseconds() }
