package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// wakeupBumpSQL bumps queue ?1's wake-up row (migration 6) for an insert
// of available jobs, appending sender ?2 to the row's last senders
// (sqlbackend.WakeSenders of sqlbackend.WakeSenderWidth digits).
var wakeupBumpSQL = fmt.Sprintf(`INSERT INTO leasehold_wakeup (queue, version, senders) VALUES (?1, 1, printf('%%0%dd', ?2))
ON CONFLICT (queue) DO UPDATE SET version = version + 1, senders = substr(senders || excluded.senders, -%d)`,
	sqlbackend.WakeSenderWidth, sqlbackend.WakeSenders*sqlbackend.WakeSenderWidth)

// wakeupReadSQL reads every wake-up row.
const wakeupReadSQL = `SELECT queue, version, senders FROM leasehold_wakeup`

// dataVersionSQL reads the connection's data version, which changes when
// another connection, of this process or another, commits to the file.
const dataVersionSQL = `PRAGMA data_version`

// wakeupInterval is how often a listener reads PRAGMA data_version.
const wakeupInterval = 5 * time.Millisecond

var _ driver.Notifier = (*Driver)(nil)

// ListenInserts calls fn with a notice for every committed insert of
// available jobs into a queue (and every resume of a queue), by any process
// on the database file, until ctx ends (it then returns nil) or reading
// fails (it returns the error). It holds one connection of the pool for
// itself, on which it reads PRAGMA data_version every wakeupInterval (5 ms):
// a counter in the file's shared memory that changes only when another
// connection commits. Only then does it read the wake-up table, one row per
// queue, and report each row whose version moved. An idle database costs a
// listener one pragma per tick and no read of any table.
//
// A notice is a hint, one per insert transaction, naming as its sender the
// random identity of that transaction, as told to the insert's
// driver.SenderTracker (0 when the insert had none). A row keeps its last 16
// senders: more bumps of one row between two reads send one more notice,
// naming no sender, for the ones it no longer has. Jobs that become
// available because their schedule arrives are not inserts and send
// nothing: clients find them by polling.
func (d *Driver) ListenInserts(ctx context.Context, ready func(), fn func(driver.InsertNotice)) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("open listener connection: %w", err)
	}
	defer conn.Close()
	err = listenWakeups(ctx, conn, ready, fn)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// listenWakeups is ListenInserts on conn.
func listenWakeups(ctx context.Context, conn *sql.Conn, ready func(), fn func(driver.InsertNotice)) error {
	pragma, err := conn.PrepareContext(ctx, dataVersionSQL)
	if err != nil {
		return fmt.Errorf("prepare data version: %w", err)
	}
	defer pragma.Close()
	read, err := conn.PrepareContext(ctx, wakeupReadSQL)
	if err != nil {
		return fmt.Errorf("prepare wake-up read: %w", err)
	}
	defer read.Close()
	var version int64
	if err := pragma.QueryRowContext(ctx).Scan(&version); err != nil {
		return fmt.Errorf("read data version: %w", err)
	}
	rows, err := readWakeups(ctx, read)
	if err != nil {
		return err
	}
	var watch sqlbackend.WakeWatch
	watch.Baseline(rows)
	ready()
	t := time.NewTicker(wakeupInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		// The version is read before the rows: a commit between the two
		// moves it again, and the next tick reads the rows once more.
		var v int64
		if err := pragma.QueryRowContext(ctx).Scan(&v); err != nil {
			return fmt.Errorf("read data version: %w", err)
		}
		if v == version {
			continue
		}
		version = v
		rows, err := readWakeups(ctx, read)
		if err != nil {
			return err
		}
		watch.Changes(rows, fn)
	}
}

// readWakeups reads every wake-up row with read (wakeupReadSQL).
func readWakeups(ctx context.Context, read *sql.Stmt) ([]sqlbackend.WakeRow, error) {
	rows, err := read.QueryContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("read wake-ups: %w", err)
	}
	defer rows.Close()
	var out []sqlbackend.WakeRow
	for rows.Next() {
		var r sqlbackend.WakeRow
		if err := rows.Scan(&r.Queue, &r.Version, &r.Senders); err != nil {
			return nil, fmt.Errorf("read wake-ups: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read wake-ups: %w", err)
	}
	return out, nil
}

// wakeSender returns the sender of an insert on e: nil (sender 0, nothing
// reported) in a caller's transaction, where the tracker is ignored
// (driver.SenderTracker), or without a tracker.
func (e *executor) wakeSender(tracker driver.SenderTracker) *sqlbackend.WakeSender {
	if !e.onPool {
		return nil
	}
	return sqlbackend.NewWakeSender(tracker)
}

// wakeQueues bumps the wake-up row of each of queues, inside the insert's
// transaction, after telling s's tracker.
func wakeQueues(ctx context.Context, q querier, s *sqlbackend.WakeSender, queues []string) error {
	s.Sending(queues)
	for _, queue := range queues {
		if _, err := q.ExecContext(ctx, wakeupBumpSQL, queue, s.ID()); err != nil {
			return fmt.Errorf("wake queue %s: %w", queue, err)
		}
	}
	return nil
}
