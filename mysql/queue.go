package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// QueueSetPaused pauses or resumes a queue in one upsert.
func (e *executor) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	q, err := e.read()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, queryQueueSetPaused, params.Name, params.Paused, params.Paused); err != nil {
		return fmt.Errorf("set queue %s paused=%v: %w", params.Name, params.Paused, translate(err))
	}
	return nil
}

// QueueList lists the queues' control rows.
func (e *executor) QueueList(ctx context.Context) ([]*driver.QueueRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryQueueList)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", translate(err))
	}
	defer rows.Close()
	out := []*driver.QueueRow{}
	for rows.Next() {
		var (
			row             driver.QueueRow
			paused, updated dbTime
		)
		if err := rows.Scan(&row.Name, &paused, &updated); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		row.PausedAt = paused.ptr()
		row.UpdatedAt = updated.Time
		out = append(out, &row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues: %w", translate(err))
	}
	return out, nil
}
