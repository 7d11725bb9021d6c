package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCountByStateSQL counts jobs per queue and state, grouped in the
// order of the (state, queue) index so that no sort is needed.
const jobCountByStateSQL = `SELECT queue, state, count(*)
FROM leasehold_job GROUP BY state, queue`

// jobThroughputSQL counts ended attempts per queue, minute and outcome,
// scanning the attempt history by its finished_at index.
const jobThroughputSQL = `
SELECT j.queue, (a.finished_at / 60000000) * 60000000 AS minute, a.outcome, count(*)
FROM leasehold_attempt a
JOIN leasehold_job j ON j.id = a.job_id
WHERE a.finished_at >= ?
GROUP BY 1, 2, 3
ORDER BY 2, 1, 3`

// queueBacklogSQL measures each queue's claimable backlog on the database
// clock.
const queueBacklogSQL = `
SELECT queue, count(*), ` + nowExpr + ` - min(scheduled_at)
FROM leasehold_job
WHERE state IN ('available', 'scheduled', 'retryable') AND scheduled_at <= ` + nowExpr + `
GROUP BY queue
ORDER BY queue`

// JobThroughput counts ended attempts per queue, minute and outcome.
func (e *executor) JobThroughput(ctx context.Context, params *driver.JobThroughputParams) ([]*leasetype.ThroughputCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, jobThroughputSQL, params.Since.UnixMicro())
	if err != nil {
		return nil, fmt.Errorf("count throughput: %w", err)
	}
	defer rows.Close()
	out := []*leasetype.ThroughputCount{}
	for rows.Next() {
		var (
			c       leasetype.ThroughputCount
			minute  int64
			outcome string
		)
		if err := rows.Scan(&c.Queue, &minute, &outcome, &c.Count); err != nil {
			return nil, fmt.Errorf("count throughput: %w", err)
		}
		c.Minute, c.Outcome = fromMicros(minute), leasetype.AttemptOutcome(outcome)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count throughput: %w", err)
	}
	return out, nil
}

// QueueBacklog measures each queue's claimable backlog.
func (e *executor) QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queueBacklogSQL)
	if err != nil {
		return nil, fmt.Errorf("measure backlog: %w", err)
	}
	defer rows.Close()
	out := []*leasetype.QueueBacklog{}
	for rows.Next() {
		var (
			b     leasetype.QueueBacklog
			ageUS int64
		)
		if err := rows.Scan(&b.Queue, &b.Available, &ageUS); err != nil {
			return nil, fmt.Errorf("measure backlog: %w", err)
		}
		b.OldestAge = max(0, time.Duration(ageUS)*time.Microsecond)
		out = append(out, &b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measure backlog: %w", err)
	}
	return out, nil
}

// JobCountByState counts jobs per queue and state, ordered by queue and state.
func (e *executor) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	out, err := sqlbackend.QueryAll(ctx, q, sqlbackend.ScanQueueStateCount, jobCountByStateSQL)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	slices.SortFunc(out, func(a, b *leasetype.QueueStateCount) int {
		return cmp.Or(cmp.Compare(a.Queue, b.Queue), cmp.Compare(a.State, b.State))
	})
	return out, nil
}
