package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// releaseTimeout bounds the clean-up of a listening connection once the
// caller's context has ended.
const releaseTimeout = 5 * time.Second

// ListenInserts calls fn with the queue name of every insert notification
// until ctx ends (it then returns nil) or the connection fails (it returns
// the error). It holds one pool connection for the whole time and calls
// ready once that connection is listening.
func (d *Driver) ListenInserts(ctx context.Context, ready func(), fn func(queue string)) error {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("acquire listener connection: %w", err)
	}
	defer releaseListener(conn)

	if _, err := conn.Exec(ctx, sqlListen); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("listen for inserts: %w", err)
	}
	ready()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("wait for insert notification: %w", err)
		}
		if n.Channel == insertChannel {
			fn(n.Payload)
		}
	}
}

// releaseListener returns a listening connection to the pool. It must not go
// back still listening: when UNLISTEN fails (the connection is broken) the
// connection is closed, and the pool destroys closed connections on release.
func releaseListener(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if conn.Conn().IsClosed() {
		conn.Release()
		return
	}
	if _, err := conn.Exec(ctx, sqlUnlisten); err != nil {
		conn.Conn().Close(ctx) //nolint:errcheck // the connection is discarded either way
	}
	conn.Release()
}
