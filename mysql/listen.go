package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
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

// wakeupWaitSQLFormat waits on the server for a bump, in one statement:
// every wakeupInterval (the %[3]s, in seconds), at most %[2]d times, it
// checks whether the sum of the wake-up rows' versions still is the %[1]d,
// the sum over the rows the listener last read; then it returns every
// wake-up row, in primary key order, when that sum differs, and no row when
// it does not. Rows are never deleted and a bump adds one to a version, so
// the sum changes with every bump. The final SELECT reads the rows and
// their sum in one consistent read. Each check is a statement of its own
// and, under autocommit, sees every commit before it. It is a MariaDB
// anonymous block (BEGIN NOT ATOMIC); MySQL answers a syntax error.
const wakeupWaitSQLFormat = `BEGIN NOT ATOMIC
	DECLARE checks INT DEFAULT 0;
	WHILE checks < %[2]d AND (SELECT COALESCE(SUM(version), 0) FROM leasehold_wakeup) = %[1]d DO
		DO SLEEP(%[3]s);
		SET checks = checks + 1;
	END WHILE;
	SELECT queue, slot, version, senders FROM leasehold_wakeup
	WHERE (SELECT COALESCE(SUM(version), 0) FROM leasehold_wakeup) <> %[1]d
	ORDER BY queue, slot;
END`

// wakeupInterval is how often a listener reads the wake-up rows.
const wakeupInterval = 10 * time.Millisecond

// wakeupWaitChecks is how many checks one wait statement makes before it
// returns without a bump: an idle listener sends a statement every
// wakeupWaitChecks * wakeupInterval (250 ms).
const wakeupWaitChecks = 25

// wakeupSumUnknown is a sum of versions no table has: a wait for a change
// from it returns every row at once.
const wakeupSumUnknown = -1

// wakeupQuerier is what a listener reads the wake-up rows with: the
// connection it holds (*sql.Conn).
type wakeupQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

var _ driver.Notifier = (*Driver)(nil)

// ListenInserts calls fn with a notice for every committed insert of
// available jobs into a queue (and every resume of a queue), by any process
// on the database, until ctx ends (it then returns nil) or reading fails
// (it returns the error). It holds one connection of the pool for itself
// and checks the wake-up table every wakeupInterval (10 ms). MySQL and
// MariaDB cannot push a notification. On MariaDB the checks run on the
// server, in one statement that returns at the first bump or after 25
// checks (wakeupWaitSQLFormat): an idle listener costs four round trips a
// second, and the statement shows in the server's process list as a query
// of up to 250 ms. On MySQL, which has no anonymous blocks, and where the
// server's max_statement_time stops the wait, each check is a read of the
// table from the client, a scan of its primary key: 100 round trips a
// second. Either way there is at most one round trip every
// wakeupInterval, and it reports each bump since the last read.
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

// listenWakeups is ListenInserts on q. Its first read is a wait statement
// that returns at once; when the server refuses it (MySQL), it reads with
// wakeupReadSQL instead, from then on.
func listenWakeups(ctx context.Context, q wakeupQuerier, ready func(), fn func(driver.InsertNotice)) error {
	wait := true
	rows, err := waitWakeups(ctx, q, wakeupSumUnknown, 0)
	if isSyntaxError(err) {
		wait = false
		rows, err = readWakeups(ctx, q)
	}
	if err != nil {
		return err
	}
	return watchWakeups(ctx, q, wait, rows, ready, fn)
}

// watchWakeups reports the bumps since rows, read last, with a wait
// statement (wait) or a read of the table from the client every
// wakeupInterval, until ctx ends or a read fails. A statement never starts
// sooner than wakeupInterval after the one before. A wait that the server
// stops for its max_statement_time turns the listener to reads from the
// client: the wait wrote nothing, and the next read reports every bump
// since rows.
func watchWakeups(ctx context.Context, q wakeupQuerier, wait bool, rows []sqlbackend.WakeRow, ready func(), fn func(driver.InsertNotice)) error {
	var watch sqlbackend.WakeWatch
	watch.Baseline(rows)
	sum := wakeupSum(rows)
	ready()
	pause := time.NewTimer(wakeupInterval)
	defer pause.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-pause.C:
		}
		pause.Reset(wakeupInterval)
		var err error
		if wait {
			rows, err = waitWakeups(ctx, q, sum, wakeupWaitChecks)
			if isStatementTimeout(err) {
				// The server's max_statement_time is shorter than a wait:
				// read from the client instead, from the same rows.
				wait = false
				rows, err = readWakeups(ctx, q)
			}
		} else {
			rows, err = readWakeups(ctx, q)
		}
		if err != nil {
			return err
		}
		if wait && len(rows) == 0 {
			continue // no bump: the sum is as it was
		}
		sum = wakeupSum(rows)
		watch.Changes(rows, fn)
	}
}

// wakeupSum is the sum of the versions of rows, as wakeupWaitSQLFormat
// computes it over the table.
func wakeupSum(rows []sqlbackend.WakeRow) int64 {
	var sum int64
	for _, r := range rows {
		sum += r.Version
	}
	return sum
}

// waitWakeups runs the wait statement (wakeupWaitSQLFormat) for a change
// of the sum of versions from sum, with at most checks checks, and returns
// every wake-up row, or none when the sum did not change. The statement
// has no arguments (the numbers are written into it), so it goes as text
// whatever the DSN's interpolateParams.
func waitWakeups(ctx context.Context, q wakeupQuerier, sum int64, checks int) ([]sqlbackend.WakeRow, error) {
	query := fmt.Sprintf(wakeupWaitSQLFormat, sum, checks, strconv.FormatFloat(wakeupInterval.Seconds(), 'f', -1, 64))
	return scanWakeups(ctx, q, query)
}

// readWakeups reads every wake-up row on q, outside any transaction: each
// read sees every commit before it.
func readWakeups(ctx context.Context, q wakeupQuerier) ([]sqlbackend.WakeRow, error) {
	return scanWakeups(ctx, q, wakeupReadSQL)
}

// scanWakeups runs query, which reads wake-up rows, and returns them.
func scanWakeups(ctx context.Context, q wakeupQuerier, query string) ([]sqlbackend.WakeRow, error) {
	rows, err := q.QueryContext(ctx, query)
	if err != nil {
		if isSyntaxError(err) || isStatementTimeout(err) {
			return nil, err
		}
		return nil, fmt.Errorf("read wake-ups: %w", translateError(err))
	}
	defer rows.Close()
	var out []sqlbackend.WakeRow
	for rows.Next() {
		var r sqlbackend.WakeRow
		if err := rows.Scan(&r.Queue, int64Into{&r.Slot}, int64Into{&r.Version}, &r.Senders); err != nil {
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
