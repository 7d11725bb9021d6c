package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
)

// DefaultReservedConns is how many connections a client's lease machinery
// keeps in a pool of its own (OpenReserved) unless the client asks for
// another number: one for the heartbeater and outcome writes, which take
// turns, one for claims, one for the expirer and the cancellation poll.
const DefaultReservedConns = 3

var _ driver.Reserver = (*Driver)(nil)

// OpenReserved opens a small pool of its own for the lease machinery of a
// client, built from the configuration of the driver's pool (the same
// connection settings and hooks: AfterConnect, PrepareConn and the others)
// with params.Conns connections (DefaultReservedConns when 0), all
// established before it returns. The connections are outside the driver's
// pool: handlers holding every connection of that pool cannot delay a lease
// renewal. Close closes the pool; the client does that at Stop.
func (d *Driver) OpenReserved(ctx context.Context, params *driver.OpenReservedParams) (driver.ReservedExecutor, error) {
	n := DefaultReservedConns
	if params != nil && params.Conns > 0 {
		n = params.Conns
	}
	cfg := d.pool.Config() // a copy
	cfg.MaxConns, cfg.MinConns, cfg.MinIdleConns = int32(n), int32(n), 0
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open reserved pool: %w", err)
	}
	// Establish every connection now, while the server has room for them:
	// a reserved connection first dialled when the pool is exhausted would
	// meet max_connections or the pooler's limit just then.
	conns := make([]*pgxpool.Conn, 0, n)
	release := func() {
		for _, c := range conns {
			c.Release()
		}
	}
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			release() // before Close, which waits for every connection
			pool.Close()
			return nil, fmt.Errorf("open reserved connection %d of %d: %w", len(conns)+1, n, translateError(err))
		}
		conns = append(conns, c)
	}
	release()
	// As GetExecutor's executor (statements naming Options.Schema), on the
	// reserved pool.
	e := &executor{db: d.q.wrap(pool), drv: d}
	return &reservedExecutor{executor: e, pool: pool}, nil
}

// reservedExecutor is an executor on a reserved pool.
type reservedExecutor struct {
	*executor
	pool *pgxpool.Pool
}

// Close closes the reserved pool.
func (r *reservedExecutor) Close() { r.pool.Close() }
