package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// jobCountRunningSQL counts running jobs, those with an unexpired lease and
// those whose lease expired: first row the queue $1 (is_queue true), then
// one row per kind in $2, zero included. The running index (id, queue,
// kind) finds the rows: its scan reads only running entries and tests queue
// or kind on them; the lease test is a filter on the rows it yields. The
// clock is clock_timestamp(), read once: the count follows LimitLock in a
// transaction that may have waited for the lock, and a lease that expired
// during the wait is counted as expired.
const jobCountRunningSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS run_now)
SELECT true AS is_queue, '' AS kind, c.live, c.expired
FROM (SELECT count(*) FILTER (WHERE lease_until > clock.run_now) AS live,
		count(*) FILTER (WHERE lease_until <= clock.run_now) AS expired
	FROM leasehold_job, clock
	WHERE state = 'running' AND queue = $1) AS c
UNION ALL
SELECT false, k.kind, c.live, c.expired
FROM unnest($2::text[]) AS k(kind)
CROSS JOIN LATERAL (SELECT count(*) FILTER (WHERE lease_until > clock.run_now) AS live,
		count(*) FILTER (WHERE lease_until <= clock.run_now) AS expired
	FROM leasehold_job, clock
	WHERE state = 'running' AND leasehold_job.kind = k.kind) AS c`

// limitCreateSQL creates the limit rows of the keys given as parallel arrays
// ($1 scopes, $2 names) that are missing. A concurrent creator of the same
// row makes it wait for that transaction, then skip the row.
const limitCreateSQL = `
INSERT INTO leasehold_limit (scope, name)
SELECT * FROM unnest($1::text[], $2::text[])
ON CONFLICT (scope, name) DO NOTHING`

// limitLockSQL locks the limit rows of the keys given as parallel arrays, in
// the order given. ORDER BY is applied below the row locking, so the rows
// are locked in that order: callers that list keys in one order cannot
// deadlock.
const limitLockSQL = `
SELECT l.scope, l.name, l.window_start, l.window_count
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(key_scope, key_name, ord)
JOIN leasehold_limit l ON l.scope = k.key_scope AND l.name = k.key_name
ORDER BY k.ord
FOR UPDATE OF l`

// clockSQL reads the database clock as it is now, not at the start of the
// transaction (now()).
const clockSQL = `SELECT clock_timestamp()`

// limitSetWindowSQL records a limit row's rate window.
const limitSetWindowSQL = `
UPDATE leasehold_limit SET window_start = $3, window_count = $4, updated_at = clock_timestamp()
WHERE scope = $1 AND name = $2`

// errLimitLockNoTx is returned by LimitLock on an executor outside a
// transaction: the locks would end with the statement and limit nothing.
var errLimitLockNoTx = errors.New("leasehold/postgres: LimitLock must run in a transaction (an executor from Begin)")

func (e *executor) JobCountRunning(ctx context.Context, params *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	rows, err := e.db.Query(ctx, jobCountRunningSQL, params.Queue, nonNil(params.Kinds))
	if err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translateError(err))
	}
	defer rows.Close()
	out := &driver.RunningCount{
		Kinds:        make(map[string]int64, len(params.Kinds)),
		KindsExpired: make(map[string]int64, len(params.Kinds)),
	}
	for rows.Next() {
		var (
			isQueue       bool
			kind          string
			live, expired int64
		)
		if err := rows.Scan(&isQueue, &kind, &live, &expired); err != nil {
			return nil, fmt.Errorf("scan running count: %w", err)
		}
		if isQueue {
			out.Queue, out.QueueExpired = live, expired
		} else {
			out.Kinds[kind], out.KindsExpired[kind] = live, expired
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translateError(err))
	}
	return out, nil
}

func (e *executor) LimitLock(ctx context.Context, params *driver.LimitLockParams) ([]*driver.LimitRow, error) {
	keys := params.Keys
	if _, ok := e.db.(pgx.Tx); !ok {
		return nil, errLimitLockNoTx
	}
	if len(keys) == 0 {
		return []*driver.LimitRow{}, nil
	}
	scopes := make([]string, len(keys))
	names := make([]string, len(keys))
	for i, k := range keys {
		scopes[i], names[i] = k.Scope, k.Name
	}
	// One round trip: the three statements run in order in the caller's
	// transaction. The clock is read by its own statement, after the one
	// that waited for the locks.
	batch := &pgx.Batch{}
	batch.Queue(limitCreateSQL, scopes, names)
	batch.Queue(limitLockSQL, scopes, names)
	batch.Queue(clockSQL)
	res := e.db.SendBatch(ctx, batch)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return nil, fmt.Errorf("create limit rows: %w", translateError(err))
	}
	locked, err := scanLimitRows(res)
	if err != nil {
		return nil, fmt.Errorf("lock limit rows: %w", translateError(err))
	}
	var now time.Time
	if err := res.QueryRow().Scan(&now); err != nil {
		return nil, fmt.Errorf("read database clock: %w", translateError(err))
	}
	if err := res.Close(); err != nil {
		return nil, fmt.Errorf("lock limit rows: %w", translateError(err))
	}
	if len(locked) != len(keys) {
		return nil, fmt.Errorf("lock limit rows: locked %d of %d rows", len(locked), len(keys))
	}
	for i, row := range locked {
		if row.Key != keys[i] {
			return nil, fmt.Errorf("lock limit rows: row %d is %v, want %v", i, row.Key, keys[i])
		}
		row.Now = now.UTC()
	}
	return locked, nil
}

// scanLimitRows reads the rows of limitLockSQL from a batch.
func scanLimitRows(res pgx.BatchResults) ([]*driver.LimitRow, error) {
	rows, err := res.Query()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*driver.LimitRow
	for rows.Next() {
		var r driver.LimitRow
		if err := rows.Scan(&r.Key.Scope, &r.Key.Name, &r.WindowStart, &r.WindowCount); err != nil {
			return nil, err
		}
		r.WindowStart = utcPtr(r.WindowStart)
		out = append(out, &r)
	}
	return out, rows.Err()
}

// LimitSetWindow records a limit row's rate window. The row is one LimitLock
// created; ErrNotFound when it does not exist.
func (e *executor) LimitSetWindow(ctx context.Context, params *driver.LimitSetWindowParams) error {
	tag, err := e.db.Exec(ctx, limitSetWindowSQL,
		params.Key.Scope, params.Key.Name, params.WindowStart, params.WindowCount)
	if err != nil {
		return fmt.Errorf("set limit window %s/%s: %w", params.Key.Scope, params.Key.Name, translateError(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set limit window %s/%s: %w", params.Key.Scope, params.Key.Name, driver.ErrNotFound)
	}
	return nil
}
