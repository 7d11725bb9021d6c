package leasehold

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// QueueInfo is a queue's control state.
type QueueInfo struct {
	// Name is the queue's name.
	Name string `json:"name"`
	// Paused reports whether claims from the queue are stopped.
	Paused bool `json:"paused"`
	// PausedAt is when it was paused, nil when active.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	// UpdatedAt is when it was last paused or resumed.
	UpdatedAt time.Time `json:"updated_at"`
}

// QueuePause pauses a queue for every client: from now on no client claims
// its jobs (the check is part of the claim statement). Running jobs go on
// and finish. Inserts into a paused queue are accepted and wait.
func (c *Client[TTx]) QueuePause(ctx context.Context, name string) error {
	return c.core.queueSetPaused(ctx, name, true)
}

// QueueResume resumes a paused queue. Clients claim from it again at once
// when the database can notify them (Postgres), else within their poll
// interval (default 1 s).
func (c *Client[TTx]) QueueResume(ctx context.Context, name string) error {
	if err := c.core.queueSetPaused(ctx, name, false); err != nil {
		return err
	}
	c.core.wakeQueue(name)
	return nil
}

func (c *clientCore) queueSetPaused(ctx context.Context, name string, paused bool) error {
	if err := validateName("queue", name); err != nil {
		return err
	}
	action := "resume"
	if paused {
		action = "pause"
	}
	err := inTx(ctx, c.exec, func(x driver.Executor) error {
		if err := x.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: name, Paused: paused}); err != nil {
			return err
		}
		_, err := x.AuditInsert(ctx, &driver.AuditInsertParams{Actor: auditActor(ctx), Action: action, Queue: name, Count: 1})
		return err
	})
	if err != nil {
		return fmt.Errorf("leasehold: %s queue %s: %w", action, name, err)
	}
	return nil
}

// QueueList returns the control state of every queue that has been paused
// or resumed, in name order. Queues never paused are active and have no entry.
func (c *Client[TTx]) QueueList(ctx context.Context) ([]*QueueInfo, error) {
	rows, err := c.core.exec.QueueList(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err) // the driver names the operation
	}
	out := make([]*QueueInfo, len(rows))
	for i, r := range rows {
		out[i] = &QueueInfo{Name: r.Name, Paused: r.PausedAt != nil, PausedAt: r.PausedAt, UpdatedAt: r.UpdatedAt}
	}
	return out, nil
}
