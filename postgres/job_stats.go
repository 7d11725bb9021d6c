package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobCountByStateSQL counts jobs per queue and state. Each branch names the
// states of one partial index (migration 4 lists them), so that it reads
// that index, not the table: the claimable states the claim index, running
// one of the running indexes, stuck the index of the states off the success
// path, the finished states the retention index (which carries queue and
// state). Together the branches cover every state the table allows.
const jobCountByStateSQL = `
SELECT queue, state, count(*) FROM (
	SELECT queue, state FROM leasehold_job WHERE state IN ('available', 'scheduled', 'retryable')
	UNION ALL
	SELECT queue, 'running' FROM leasehold_job WHERE state = 'running'
	UNION ALL
	SELECT queue, 'stuck' FROM leasehold_job WHERE state = 'stuck'
	UNION ALL
	SELECT queue, state FROM leasehold_job WHERE state IN ('completed', 'discarded', 'cancelled')
) AS jobs
GROUP BY queue, state ORDER BY queue, state`

// jobThroughputSQL counts ended attempts per queue, minute and outcome. It
// scans the attempt history by its finished_at index and joins each attempt
// to its job for the queue.
const jobThroughputSQL = `
SELECT j.queue, date_trunc('minute', a.finished_at) AS minute, a.outcome, count(*)
FROM leasehold_attempt a
JOIN leasehold_job j ON j.id = a.job_id
WHERE a.finished_at >= $1
GROUP BY 1, 2, 3
ORDER BY 2, 1, 3`

// queueBacklogSQL measures each queue's claimable backlog on the database
// clock, through the partial claim index.
const queueBacklogSQL = `
SELECT queue, count(*), extract(epoch FROM now() - min(scheduled_at)) * 1000000
FROM leasehold_job
WHERE state IN ('available', 'scheduled', 'retryable') AND scheduled_at <= now()
GROUP BY queue
ORDER BY queue`

func (e *executor) JobThroughput(ctx context.Context, params *driver.JobThroughputParams) ([]*leasetype.ThroughputCount, error) {
	rows, err := e.db.Query(ctx, jobThroughputSQL, params.Since)
	if err != nil {
		return nil, fmt.Errorf("count throughput: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.ThroughputCount{}
	for rows.Next() {
		var (
			c       leasetype.ThroughputCount
			outcome string
		)
		if err := rows.Scan(&c.Queue, &c.Minute, &outcome, &c.Count); err != nil {
			return nil, fmt.Errorf("scan throughput: %w", err)
		}
		c.Minute = c.Minute.UTC()
		c.Outcome = leasetype.AttemptOutcome(outcome)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count throughput: %w", translateError(err))
	}
	return out, nil
}

func (e *executor) QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error) {
	rows, err := e.db.Query(ctx, queueBacklogSQL)
	if err != nil {
		return nil, fmt.Errorf("measure backlog: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.QueueBacklog{}
	for rows.Next() {
		var (
			b     leasetype.QueueBacklog
			ageUS float64
		)
		if err := rows.Scan(&b.Queue, &b.Available, &ageUS); err != nil {
			return nil, fmt.Errorf("scan backlog: %w", err)
		}
		b.OldestAge = max(0, time.Duration(ageUS)*time.Microsecond)
		out = append(out, &b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("measure backlog: %w", translateError(err))
	}
	return out, nil
}

func (e *executor) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	rows, err := e.db.Query(ctx, jobCountByStateSQL)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", translateError(err))
	}
	defer rows.Close()
	var out []*leasetype.QueueStateCount
	for rows.Next() {
		var (
			c     leasetype.QueueStateCount
			state string
		)
		if err := rows.Scan(&c.Queue, &state, &c.Count); err != nil {
			return nil, fmt.Errorf("scan job count: %w", err)
		}
		c.State = leasetype.JobState(state)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count jobs: %w", translateError(err))
	}
	return out, nil
}
