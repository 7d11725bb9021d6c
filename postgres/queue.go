package postgres

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// queueSetPausedSQL pauses ($2 true) or resumes a queue, creating its
// control row when missing. Resuming notifies listeners, so idle clients
// claim at once.
const queueSetPausedSQL = `
WITH upserted AS (
	INSERT INTO leasehold_queue (name, paused_at, updated_at)
	VALUES ($1, CASE WHEN $2::boolean THEN now() END, now())
	ON CONFLICT (name) DO UPDATE SET
		paused_at = CASE WHEN $2::boolean THEN coalesce(leasehold_queue.paused_at, now()) END,
		updated_at = now()
	RETURNING name
)
SELECT CASE WHEN $2::boolean THEN '' ELSE pg_notify('leasehold_insert', name)::text END FROM upserted`

// queueListSQL lists the queues' control rows.
const queueListSQL = `SELECT name, paused_at, updated_at FROM leasehold_queue ORDER BY name`

func (e *executor) QueueSetPaused(ctx context.Context, params *driver.QueueSetPausedParams) error {
	var ignored string
	if err := e.db.QueryRow(ctx, queueSetPausedSQL, params.Name, params.Paused).Scan(&ignored); err != nil {
		return fmt.Errorf("set queue %s paused=%v: %w", params.Name, params.Paused, translateError(err))
	}
	return nil
}

func (e *executor) QueueList(ctx context.Context) ([]*driver.QueueRow, error) {
	rows, err := e.db.Query(ctx, queueListSQL)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", translateError(err))
	}
	defer rows.Close()
	out := []*driver.QueueRow{}
	for rows.Next() {
		var q driver.QueueRow
		if err := rows.Scan(&q.Name, &q.PausedAt, &q.UpdatedAt); err != nil {
			return nil, fmt.Errorf("scan queue: %w", err)
		}
		if q.PausedAt != nil {
			t := q.PausedAt.UTC()
			q.PausedAt = &t
		}
		q.UpdatedAt = q.UpdatedAt.UTC()
		out = append(out, &q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list queues: %w", translateError(err))
	}
	return out, nil
}
