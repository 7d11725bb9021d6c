package mysql

import (
	"context"
	"database/sql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// DefaultReservedConns is how many connections of the *sql.DB a client's
// lease machinery pins for itself (OpenReserved) unless the client asks for
// another number.
const DefaultReservedConns = 2

var _ driver.Reserver = (*Driver)(nil)

// OpenReserved pins params.Conns connections (DefaultReservedConns when 0)
// of the driver's *sql.DB for the lease machinery of a client, and returns an
// executor on them; the client closes it at Stop, which gives them back.
// database/sql cannot derive a second pool from a *sql.DB, so these
// connections count against the DB's SetMaxOpenConns: size it for your
// handlers plus these. Handlers holding every other connection cannot delay
// a lease renewal. A pinned connection that dies is replaced from the pool.
// The executor ends leases and claims jobs in one transaction
// (driver.FinishClaimer, driver.AttemptsClaimer) on one connection, as the
// pool's does.
func (d *Driver) OpenReserved(ctx context.Context, params *driver.OpenReservedParams) (driver.ReservedExecutor, error) {
	n := DefaultReservedConns
	if params != nil && params.Conns > 0 {
		n = params.Conns
	}
	return sqlbackend.OpenClaimingLanes(ctx, d.db, n, d.GetExecutor(), func(c *sql.Conn) sqlbackend.ClaimingExecutor {
		return &executor{d: d, q: c, onPool: true, conn: c}
	})
}
