package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// insertChannel is the LISTEN/NOTIFY channel; payloads are queue names.
const insertChannel = "leasehold_insert"

// listenSQL subscribes a connection to insertChannel.
const listenSQL = `LISTEN leasehold_insert`

// closeTimeout bounds the closing of a listening connection once the
// caller's context has ended.
const closeTimeout = 5 * time.Second

// ListenInserts calls fn with every insert notification (its queue, and as
// its sender the process ID of the backend that sent it) until ctx ends (it then returns nil) or the connection fails (it returns
// the error). It listens on a connection of its own, opened with the pool's
// connection settings but outside the pool, so a listening client never
// takes a connection the pool's users are counting on. It calls ready once
// the connection is listening.
func (d *Driver) ListenInserts(ctx context.Context, ready func(), fn func(driver.InsertNotice)) error {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig.Copy())
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("open listener connection: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		conn.Close(closeCtx) //nolint:errcheck // the connection is discarded either way
	}()

	if _, err := conn.Exec(ctx, listenSQL); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listen for inserts: %w", err)
	}
	ready()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("wait for insert notification: %w", err)
		}
		if n.Channel == insertChannel {
			fn(driver.InsertNotice{Queue: n.Payload, Sender: int64(n.PID)})
		}
	}
}
