package mysql

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
)

// errLimitLockTx is returned by LimitLock outside a transaction the driver
// started on its pool.
var errLimitLockTx = errors.New("leasehold/mysql: LimitLock needs a transaction from Begin on the driver's executor " +
	"(READ COMMITTED, so that the count after the lock sees the previous holder's commit)")

// JobCountRunning counts the running jobs with an unexpired lease of
// params.Queue and of each of params.Kinds, in one statement.
func (e *executor) JobCountRunning(ctx context.Context, params *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	query, args := jobCountRunningQueue, []any{params.Queue}
	if len(params.Kinds) > 0 {
		query += fmt.Sprintf(jobCountRunningKinds, placeholders(len(params.Kinds)))
		for _, k := range params.Kinds {
			args = append(args, k)
		}
	}
	out := &driver.RunningCount{Kinds: make(map[string]int64, len(params.Kinds))}
	for _, k := range params.Kinds {
		out.Kinds[k] = 0
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translate(err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			byKind bool
			kind   *string
			n      int64
		)
		if err := rows.Scan(&byKind, &kind, &n); err != nil {
			return nil, fmt.Errorf("count running jobs: %w", err)
		}
		if byKind && kind != nil {
			out.Kinds[*kind] = n
		} else if !byKind {
			out.Queue = n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translate(err))
	}
	return out, nil
}

// LimitLock creates the missing limit rows of keys and locks them in the
// order given, then reads them with the database clock. It runs only in a
// transaction from Begin on the driver's executor (or a savepoint inside
// one), which is READ COMMITTED: each statement after the lock then reads
// the latest commits, so the caller's count sees the jobs the previous
// holder of the lock claimed. In a user's transaction the isolation level is
// the user's, and under REPEATABLE READ the count would read the snapshot
// taken before the lock was granted; LimitLock refuses it.
func (e *executor) LimitLock(ctx context.Context, params *driver.LimitLockParams) ([]*driver.LimitRow, error) {
	keys := params.Keys
	if err := e.open(); err != nil {
		return nil, err
	}
	if !e.driverTx {
		return nil, errLimitLockTx
	}
	if len(keys) == 0 {
		return []*driver.LimitRow{}, nil
	}
	inserts := make([]string, len(keys))
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pair := sqlText(k.Scope) + ", " + sqlText(k.Name)
		inserts[i], pairs[i] = "("+pair+", 0, "+sqlNow+")", "("+pair+")"
	}
	// The INSERT has no result set; the driver moves on to the SELECT's.
	query := fmt.Sprintf(limitLock, strings.Join(inserts, ", "), strings.Join(pairs, ", "))
	rows, err := e.q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("lock limits: %w", translate(err))
	}
	defer rows.Close()
	byKey := make(map[driver.LimitKey]*driver.LimitRow, len(keys))
	for rows.Next() {
		var (
			r          driver.LimitRow
			start, now dbTime
		)
		if err := rows.Scan(&r.Key.Scope, &r.Key.Name, &start, &r.WindowCount, &now); err != nil {
			return nil, fmt.Errorf("lock limits: %w", err)
		}
		r.WindowStart, r.Now = start.ptr(), now.Time
		byKey[r.Key] = &r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lock limits: %w", translate(err))
	}
	out := make([]*driver.LimitRow, len(keys))
	for i, k := range keys {
		r, ok := byKey[k]
		if !ok {
			return nil, fmt.Errorf("lock limits: row %s %q missing after its insert", k.Scope, k.Name)
		}
		c := *r
		out[i] = &c
	}
	return out, nil
}

// LimitSetWindow records a limit row's rate window.
func (e *executor) LimitSetWindow(ctx context.Context, params *driver.LimitSetWindowParams) error {
	q, err := e.read()
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx, queryLimitSetWindow, timeArg(&params.WindowStart), params.WindowCount,
		params.Key.Scope, params.Key.Name)
	if err != nil {
		return fmt.Errorf("record rate window of %s %q: %w", params.Key.Scope, params.Key.Name, translate(err))
	}
	return nil
}

// sqlText returns s as a utf8mb4_bin string literal: hex digits with a
// character set introducer, which need no escaping whatever the sql_mode.
func sqlText(s string) string {
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "' COLLATE utf8mb4_bin"
}
