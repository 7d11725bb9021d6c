package leasehold

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// PeriodicSchedule is a periodic job's stored state: its spec, the next
// slot a leader will enqueue, and the last slot enqueued with its job.
type PeriodicSchedule = driver.PeriodicRow

// PeriodicSchedules returns every periodic schedule registered in the
// database (by any client), in name order.
func (c *Client[TTx]) PeriodicSchedules(ctx context.Context) ([]*PeriodicSchedule, error) {
	rows, err := c.core.exec.PeriodicList(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasehold: list periodic schedules: %w", err)
	}
	return rows, nil
}
