package leasehold

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Clients returns the fleet's working clients from the client registry
// (table leasehold_client), in owner order: every started client upserts
// its row every Config.RegistryInterval and deletes it when it stops. A
// row with Alive false belongs to a client that stopped beating without
// stopping (it crashed or lost the database); it is pruned a lease TTL
// later by any working client.
func (c *Client[TTx]) Clients(ctx context.Context) ([]*leasetype.ClientRow, error) {
	rows, err := c.core.exec.ClientList(ctx, &driver.ClientListParams{})
	if err != nil {
		return nil, fmt.Errorf("leasehold: %w", err)
	}
	return rows, nil
}
