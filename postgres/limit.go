package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
)

// errLimitLockNoTx is returned by LimitLock on an executor outside a
// transaction: the locks would end with the statement and limit nothing.
var errLimitLockNoTx = errors.New("leasehold/postgres: LimitLock must run in a transaction (an executor from Begin)")

func (e *executor) JobCountRunning(ctx context.Context, params *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	rows, err := e.db.Query(ctx, sqlJobCountRunning, params.Queue, nonNil(params.Kinds))
	if err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translate(err))
	}
	defer rows.Close()
	out := &driver.RunningCount{Kinds: make(map[string]int64, len(params.Kinds))}
	for rows.Next() {
		var (
			isQueue bool
			kind    string
			n       int64
		)
		if err := rows.Scan(&isQueue, &kind, &n); err != nil {
			return nil, fmt.Errorf("scan running count: %w", err)
		}
		if isQueue {
			out.Queue = n
		} else {
			out.Kinds[kind] = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translate(err))
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
	batch.Queue(sqlLimitCreate, scopes, names)
	batch.Queue(sqlLimitLock, scopes, names)
	batch.Queue(sqlClock)
	res := e.db.SendBatch(ctx, batch)
	defer res.Close()
	if _, err := res.Exec(); err != nil {
		return nil, fmt.Errorf("create limit rows: %w", translate(err))
	}
	locked, err := scanLimitRows(res)
	if err != nil {
		return nil, fmt.Errorf("lock limit rows: %w", translate(err))
	}
	var now time.Time
	if err := res.QueryRow().Scan(&now); err != nil {
		return nil, fmt.Errorf("read database clock: %w", translate(err))
	}
	if err := res.Close(); err != nil {
		return nil, fmt.Errorf("lock limit rows: %w", translate(err))
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

// scanLimitRows reads the rows of sqlLimitLock from a batch.
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
	tag, err := e.db.Exec(ctx, sqlLimitSetWindow,
		params.Key.Scope, params.Key.Name, params.WindowStart, params.WindowCount)
	if err != nil {
		return fmt.Errorf("set limit window %s/%s: %w", params.Key.Scope, params.Key.Name, translate(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set limit window %s/%s: %w", params.Key.Scope, params.Key.Name, driver.ErrNotFound)
	}
	return nil
}
