package mysql

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// JobThroughput counts ended attempts per queue, minute and outcome.
func (e *executor) JobThroughput(ctx context.Context, params *driver.JobThroughputParams) ([]*leasetype.ThroughputCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryJobThroughput, timeArg(&params.Since))
	if err != nil {
		return nil, fmt.Errorf("count throughput: %w", translate(err))
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
		return nil, fmt.Errorf("count throughput: %w", translate(err))
	}
	return out, nil
}

// QueueBacklog measures each queue's claimable backlog.
func (e *executor) QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryQueueBacklog)
	if err != nil {
		return nil, fmt.Errorf("measure backlog: %w", translate(err))
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
		return nil, fmt.Errorf("measure backlog: %w", translate(err))
	}
	return out, nil
}
