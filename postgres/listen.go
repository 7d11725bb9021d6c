package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// insertChannel is the LISTEN/NOTIFY channel; payloads are queue names.
const insertChannel = "leasehold_insert"

// errListenDisabled is returned by ListenInserts with Options.DisableListen.
var errListenDisabled = errors.New("leasehold/postgres: listening is disabled (Options.DisableListen)")

// closeTimeout bounds the closing of a listening connection once the
// caller's context has ended.
const closeTimeout = 5 * time.Second

// ListenInserts calls fn with every insert notification (its queue, and as
// its sender the process ID of the backend that sent it) until ctx ends (it
// then returns nil) or the connection fails (it returns the error). It
// listens on a connection of its own, outside the pool, so a listening
// client never takes a connection the pool's users are counting on: opened
// with Options.ListenURL when set, else with the pool's connection settings.
// It calls ready once the connection is listening.
//
// LISTEN needs a session of its own on the server. Through a pooler in
// transaction mode (PgBouncer's pool_mode = transaction) the LISTEN runs on
// whichever server connection the pooler lends and is lost with it: set
// Options.ListenURL to a direct connection, or Options.DisableListen. A
// client that listens but hears nothing warns (leasehold's
// Stats.NotificationsSilent) and relies on polling.
func (d *Driver) ListenInserts(ctx context.Context, ready func(), fn func(driver.InsertNotice)) error {
	if d.noListen {
		return errListenDisabled
	}
	cfg := d.listenConfig
	if cfg == nil {
		cfg = d.pool.Config().ConnConfig
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
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

	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{d.channel}.Sanitize()); err != nil {
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
		if n.Channel == d.channel {
			fn(driver.InsertNotice{Queue: n.Payload, Sender: int64(n.PID)})
		}
	}
}

// Notifies reports whether the driver listens for insert notifications:
// false with Options.DisableListen (see driver.NotifierSwitch).
func (d *Driver) Notifies() bool { return !d.noListen }
