package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// Queue control.
const (
	// queueSetPausedSQL pauses (1) or resumes (0) a queue, creating its
	// control row when missing: name, paused, paused.
	queueSetPausedSQL = `INSERT INTO leasehold_queue (name, paused_at, updated_at)
VALUES (?, IF(?, ` + nowExpr + `, NULL), ` + nowExpr + `)
ON DUPLICATE KEY UPDATE
	paused_at = IF(?, COALESCE(paused_at, ` + nowExpr + `), NULL),
	updated_at = ` + nowExpr
	queueListSQL = `SELECT name, paused_at, updated_at FROM leasehold_queue ORDER BY name`
)

// QueueSetPaused pauses or resumes a queue in one upsert; a resume then
// bumps the queue's wake-up row, so that listening clients claim at once.
func (e *executor) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	q, err := e.read()
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, queueSetPausedSQL, params.Name, params.Paused, params.Paused); err != nil {
		return fmt.Errorf("set queue %s paused=%v: %w", params.Name, params.Paused, translateError(err))
	}
	if params.Paused {
		return nil
	}
	// A resume wakes the listening clients, as on Postgres: on the pool
	// just after the resume commits, in a transaction with it.
	if err := wakeQueues(ctx, q, nil, []string{params.Name}); err != nil {
		return fmt.Errorf("resume queue %s: %w", params.Name, translateError(err))
	}
	return nil
}

// QueueList lists the queues' control rows.
func (e *executor) QueueList(ctx context.Context) ([]*driver.QueueRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queueListSQL)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", translateError(err))
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
		return nil, fmt.Errorf("list queues: %w", translateError(err))
	}
	return out, nil
}
