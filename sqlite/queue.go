package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// queueSetPausedSQL pauses (?2 = 1) or resumes queue ?1, creating its
// control row when missing.
const queueSetPausedSQL = `INSERT INTO leasehold_queue (name, paused_at, updated_at)
VALUES (?1, CASE WHEN ?2 THEN ` + nowExpr + ` END, ` + nowExpr + `)
ON CONFLICT (name) DO UPDATE SET
	paused_at = CASE WHEN ?2 THEN coalesce(leasehold_queue.paused_at, ` + nowExpr + `) END,
	updated_at = ` + nowExpr

// queueListSQL lists the queues' control rows.
const queueListSQL = `SELECT name, paused_at, updated_at FROM leasehold_queue ORDER BY name`

// QueueSetPaused pauses or resumes a queue. Resuming bumps the queue's
// wake-up row, so that listening clients claim at once.
func (e *executor) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	err := e.write(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, queueSetPausedSQL, params.Name, params.Paused); err != nil || params.Paused {
			return err
		}
		// A resume wakes the listening clients, as on Postgres.
		return wakeQueues(ctx, q, nil, []string{params.Name})
	})
	if err != nil {
		return fmt.Errorf("set queue %s paused=%v: %w", params.Name, params.Paused, err)
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
		return nil, fmt.Errorf("list queues: %w", err)
	}
	defer rows.Close()
	out := []*driver.QueueRow{}
	for rows.Next() {
		var (
			row     driver.QueueRow
			paused  sql.NullInt64
			updated int64
		)
		if err := rows.Scan(&row.Name, &paused, &updated); err != nil {
			return nil, fmt.Errorf("list queues: %w", err)
		}
		if paused.Valid {
			t := fromMicros(paused.Int64)
			row.PausedAt = &t
		}
		row.UpdatedAt = fromMicros(updated)
		out = append(out, &row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return out, nil
}
