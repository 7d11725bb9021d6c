package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCountByStateSQL counts jobs per queue and state.
const jobCountByStateSQL = `SELECT queue, state, COUNT(*)
FROM leasehold_job GROUP BY queue, state ORDER BY queue, state`

// jobThroughputSQL counts ended attempts per queue, minute and outcome,
// scanning the attempt history by its finished_at index.
const jobThroughputSQL = `
SELECT j.queue, DATE_FORMAT(a.finished_at, '%Y-%m-%d %H:%i:00') AS minute, a.outcome, COUNT(*)
FROM leasehold_attempt a
JOIN leasehold_job j ON j.id = a.job_id
WHERE a.finished_at >= CAST(? AS DATETIME(6))
GROUP BY j.queue, minute, a.outcome
ORDER BY minute, j.queue, a.outcome`

// queueBacklogSQL measures each queue's claimable backlog on the database
// clock, in microseconds.
const queueBacklogSQL = `
SELECT queue, COUNT(*), TIMESTAMPDIFF(MICROSECOND, MIN(scheduled_at), ` + nowExpr + `)
FROM leasehold_job
WHERE state IN ` + claimableStates + ` AND scheduled_at <= ` + nowExpr + `
GROUP BY queue
ORDER BY queue`

// JobThroughput counts ended attempts per queue, minute and outcome.
func (e *executor) JobThroughput(ctx context.Context, params *driver.JobThroughputParams) ([]*leasetype.ThroughputCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, jobThroughputSQL, timeArg(&params.Since))
	if err != nil {
		return nil, fmt.Errorf("count throughput: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.ThroughputCount{}
	for rows.Next() {
		var (
			c       leasetype.ThroughputCount
			minute  dbTime
			outcome string
		)
		if err := rows.Scan(&c.Queue, &minute, &outcome, &c.Count); err != nil {
			return nil, fmt.Errorf("count throughput: %w", err)
		}
		c.Minute, c.Outcome = minute.Time, leasetype.AttemptOutcome(outcome)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count throughput: %w", translateError(err))
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
		return nil, fmt.Errorf("measure backlog: %w", translateError(err))
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
		return nil, fmt.Errorf("measure backlog: %w", translateError(err))
	}
	return out, nil
}

// JobCountByState counts jobs per queue and state, ordered by queue and state.
func (e *executor) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	counts, err := sqlbackend.QueryAll(ctx, q, sqlbackend.ScanQueueStateCount, jobCountByStateSQL)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", translateError(err))
	}
	return counts, nil
}
