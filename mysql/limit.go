package mysql

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
)

// jobCountRunningQueueSQL counts the running jobs of queue ?1 (the row
// marked 0), those with an unexpired lease and those whose lease expired;
// jobCountRunningKindsSQLFormat adds those of each kind asked for, in every
// queue (rows marked 1). It reads the running indexes (running_queue,
// running_kind) and checks lease_until on the rows, since a heartbeat must
// touch no index. One statement, so the counts come from one consistent
// read; in READ COMMITTED that read is fresh, and sees every claim
// committed before it.
const jobCountRunningQueueSQL = `SELECT 0, NULL, COALESCE(SUM(lease_until > ` + nowExpr + `), 0),
	COALESCE(SUM(lease_until <= ` + nowExpr + `), 0)
FROM leasehold_job
WHERE running_queue = ?`

// jobCountRunningKindsSQLFormat is the per-kind part of the count, appended
// with UNION ALL when kinds are asked for; the %s is their placeholders.
const jobCountRunningKindsSQLFormat = `
UNION ALL
SELECT 1, running_kind, SUM(lease_until > ` + nowExpr + `), SUM(lease_until <= ` + nowExpr + `)
FROM leasehold_job
WHERE running_kind IN (%s)
GROUP BY running_kind`

// limitLockSQLFormat creates the limit rows that are missing and locks every row
// named, then reads them and the database clock: two statements sent in one
// round trip (multiStatements), since the lock is held from the first to the
// commit. The first %s is the rows to insert, "(scope, name, 0, now)" each,
// the second the (scope, name) pairs; the keys are literals (sqlText), as a
// statement with placeholders cannot hold two statements without
// interpolateParams.
//
// The INSERT locks the rows one after the other in the order of its rows.
// Its no-op update makes InnoDB take an exclusive lock on a row that exists;
// INSERT IGNORE would take a shared one, and two claimers upgrading their
// shared locks for the read deadlock. The SELECT starts once the INSERT has
// the locks, so its clock is read after them; its FOR UPDATE changes nothing
// then (the locks are held) but says what the read relies on.
const limitLockSQLFormat = `INSERT INTO leasehold_limit (scope, name, window_count, updated_at)
VALUES %s
ON DUPLICATE KEY UPDATE window_count = window_count;
SELECT scope, name, window_start, window_count, ` + nowExpr + `
FROM leasehold_limit
WHERE (scope, name) IN (%s)
FOR UPDATE`

// limitSetWindowSQL records a limit row's rate window: start, count,
// scope, name.
const limitSetWindowSQL = `UPDATE leasehold_limit
SET window_start = CAST(? AS DATETIME(6)), window_count = ?, updated_at = ` + nowExpr + `
WHERE scope = ? AND name = ?`

// errLimitLockTx is returned by LimitLock outside a transaction the driver
// started on its pool.
var errLimitLockTx = errors.New("leasehold/mysql: LimitLock needs a transaction from Begin on the driver's executor " +
	"(READ COMMITTED, so that the count after the lock sees the previous holder's commit)")

// JobCountRunning counts the running jobs of params.Queue and of each of
// params.Kinds, by whether their lease expired, in one statement.
func (e *executor) JobCountRunning(ctx context.Context, params *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	query, args := jobCountRunningQueueSQL, []any{params.Queue}
	if len(params.Kinds) > 0 {
		query += fmt.Sprintf(jobCountRunningKindsSQLFormat, placeholders(len(params.Kinds)))
		for _, k := range params.Kinds {
			args = append(args, k)
		}
	}
	out := &driver.RunningCount{
		Kinds:        make(map[string]int64, len(params.Kinds)),
		KindsExpired: make(map[string]int64, len(params.Kinds)),
	}
	for _, k := range params.Kinds {
		out.Kinds[k], out.KindsExpired[k] = 0, 0
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translateError(err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			byKind        bool
			kind          *string
			live, expired int64
		)
		if err := rows.Scan(&byKind, &kind, &live, &expired); err != nil {
			return nil, fmt.Errorf("count running jobs: %w", err)
		}
		if byKind && kind != nil {
			out.Kinds[*kind], out.KindsExpired[*kind] = live, expired
		} else if !byKind {
			out.Queue, out.QueueExpired = live, expired
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running jobs: %w", translateError(err))
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
		inserts[i], pairs[i] = "("+pair+", 0, "+nowExpr+")", "("+pair+")"
	}
	// The INSERT has no result set; the driver moves on to the SELECT's.
	query := fmt.Sprintf(limitLockSQLFormat, strings.Join(inserts, ", "), strings.Join(pairs, ", "))
	rows, err := e.q.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("lock limits: %w", translateError(err))
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
		return nil, fmt.Errorf("lock limits: %w", translateError(err))
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
	_, err = q.ExecContext(ctx, limitSetWindowSQL, timeArg(&params.WindowStart), params.WindowCount,
		params.Key.Scope, params.Key.Name)
	if err != nil {
		return fmt.Errorf("record rate window of %s %q: %w", params.Key.Scope, params.Key.Name, translateError(err))
	}
	return nil
}

// sqlText returns s as a utf8mb4_bin string literal: hex digits with a
// character set introducer, which need no escaping whatever the sql_mode.
func sqlText(s string) string {
	return "_utf8mb4 X'" + hex.EncodeToString([]byte(s)) + "' COLLATE utf8mb4_bin"
}
