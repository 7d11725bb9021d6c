package sqlite

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
// They count against the DB's SetMaxOpenConns. Handlers holding every other
// connection, or read transactions, cannot delay a lease renewal; a handler
// holding a write transaction holds SQLite's single write lock and delays
// every writer, these connections too, until it ends.
func (d *Driver) OpenReserved(ctx context.Context, params *driver.OpenReservedParams) (driver.ReservedExecutor, error) {
	n := DefaultReservedConns
	if params != nil && params.Conns > 0 {
		n = params.Conns
	}
	return sqlbackend.OpenLanes(ctx, d.db, n, d.GetExecutor(), func(c *sql.Conn) driver.Executor {
		return &executor{d: d, q: cachedQuerier{cache: d.stmts, conn: c}, raw: c, onPool: true, conn: c}
	})
}
