package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// wakeupBumpSQL starts the bump of the wake-up rows of an insert of
// available jobs; wakeQueues appends one wakeupBumpRow (queue, sender) per
// queue, in queue order, and wakeupBumpEnd. Each queue has 16 rows
// (migration 6): an insert bumps the one of its connection's slot,
// CONNECTION_ID() % 16.
const (
	wakeupBumpSQL = `INSERT INTO leasehold_wakeup (queue, slot, version, senders) VALUES `
	wakeupBumpRow = `(?, CONNECTION_ID() % 16, 1, LPAD(?, 19, '0'))`
)

// wakeupBumpEnd appends the sender to the row's last senders
// (sqlbackend.WakeSenders of sqlbackend.WakeSenderWidth digits).
var wakeupBumpEnd = fmt.Sprintf(` ON DUPLICATE KEY UPDATE version = version + 1, senders = RIGHT(CONCAT(senders, VALUES(senders)), %d)`,
	sqlbackend.WakeSenders*sqlbackend.WakeSenderWidth)

// wakeupReadSQL reads every wake-up row, in primary key order.
const wakeupReadSQL = `SELECT queue, slot, version, senders FROM leasehold_wakeup ORDER BY queue, slot`

// wakeupInterval is how often a listener reads the wake-up rows.
const wakeupInterval = 10 * time.Millisecond

var _ driver.Notifier = (*Driver)(nil)

// ListenInserts calls fn with a notice for every committed insert of
// available jobs into a queue (and every resume of a queue), by any process
// on the database, until ctx ends (it then returns nil) or reading fails
// (it returns the error). It holds one connection of the pool for itself,
// on which it reads the wake-up table every wakeupInterval (10 ms): one
// statement, a scan of the table's primary key, at most 16 rows per queue.
// It reports each bump since the last read. MySQL and MariaDB cannot push
// a notification, so an idle listener costs 100 such reads a second.
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
		return fmt.Errorf("open listener connection: %w", translateError(err))
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
	rows, err := readWakeups(ctx, conn)
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
		rows, err := readWakeups(ctx, conn)
		if err != nil {
			return err
		}
		watch.Changes(rows, fn)
	}
}

// readWakeups reads every wake-up row on conn, outside any transaction: each
// read sees every commit before it.
func readWakeups(ctx context.Context, conn *sql.Conn) ([]sqlbackend.WakeRow, error) {
	rows, err := conn.QueryContext(ctx, wakeupReadSQL)
	if err != nil {
		return nil, fmt.Errorf("read wake-ups: %w", translateError(err))
	}
	defer rows.Close()
	var out []sqlbackend.WakeRow
	for rows.Next() {
		var r sqlbackend.WakeRow
		if err := rows.Scan(&r.Queue, &r.Slot, &r.Version, &r.Senders); err != nil {
			return nil, fmt.Errorf("read wake-ups: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read wake-ups: %w", translateError(err))
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

// wakeQueues bumps the wake-up rows of queues in one statement, inside the
// insert's transaction, after telling s's tracker. The rows are locked in
// queue order, so two inserts into the same queues cannot deadlock on them.
func wakeQueues(ctx context.Context, q querier, s *sqlbackend.WakeSender, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(queues))
	s.Sending(sorted)
	var b strings.Builder
	b.WriteString(wakeupBumpSQL)
	args := make([]any, 0, 2*len(sorted))
	for i, queue := range sorted {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(wakeupBumpRow)
		args = append(args, queue, s.ID())
	}
	b.WriteString(wakeupBumpEnd)
	if _, err := q.ExecContext(ctx, b.String(), args...); err != nil {
		return fmt.Errorf("wake queues: %w", err)
	}
	return nil
}

// availableQueues returns the queues into which JobInsertFast inserted
// available jobs, by jobInsertFastRow's rule: without a schedule, or one not
// after the database clock, which it reads only when some job has a
// schedule.
func availableQueues(ctx context.Context, q querier, jobs []*driver.JobInsertParams) ([]string, error) {
	var (
		queues []string
		now    dbTime
		read   bool
	)
	for _, p := range jobs {
		if p.ScheduledAt != nil && !read {
			if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
				return nil, fmt.Errorf("read database clock: %w", translateError(err))
			}
			read = true
		}
		if p.ScheduledAt == nil || !p.ScheduledAt.After(now.Time) {
			queues = sqlbackend.AddQueue(queues, p.Queue)
		}
	}
	return queues, nil
}
