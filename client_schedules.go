package leasehold

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/leasetype"
)

// PeriodicSchedules returns every periodic schedule registered in the
// database (by any client), in name order.
func (c *Client[TTx]) PeriodicSchedules(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	rows, err := c.core.exec.PeriodicList(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasehold: list periodic schedules: %w", err)
	}
	return rows, nil
}
