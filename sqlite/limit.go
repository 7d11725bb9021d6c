package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// jobCountRunningQueueSQL counts the running jobs of queue ?1, those whose
// lease has not expired and those whose lease has, on the (state, queue)
// index.
const jobCountRunningQueueSQL = `SELECT coalesce(sum(lease_until > ` + nowExpr + `), 0),
	coalesce(sum(lease_until <= ` + nowExpr + `), 0)
FROM leasehold_job
WHERE state = 'running' AND queue = ?1`

// jobCountRunningKindsSQL counts, for each kind of the JSON array ?1, the
// running jobs of that kind in every queue, as jobCountRunningQueueSQL: one
// row per kind asked, zero included, each counted on the partial
// running-by-kind index.
const jobCountRunningKindsSQL = `SELECT k.value,
	(SELECT count(*) FROM leasehold_job
	 WHERE state = 'running' AND kind = k.value AND lease_until > ` + nowExpr + `),
	(SELECT count(*) FROM leasehold_job
	 WHERE state = 'running' AND kind = k.value AND lease_until <= ` + nowExpr + `)
FROM json_each(?1) AS k`

// limitInsertMissingSQL creates the limit rows of ?1, a JSON array of
// {"scope", "name"}, that do not exist. The WHERE true lets the parser
// tell the upsert clause from a join constraint.
const limitInsertMissingSQL = `INSERT INTO leasehold_limit (scope, name, updated_at)
SELECT k.value ->> '$.scope', k.value ->> '$.name', ` + nowExpr + `
FROM json_each(?1) AS k
WHERE true
ON CONFLICT (scope, name) DO NOTHING`

// limitReadSQL reads the limit rows of ?1, a JSON array of {"scope",
// "name"}, in the array's order (a key given twice is read twice).
const limitReadSQL = `SELECT l.window_start, l.window_count
FROM json_each(?1) AS k
JOIN leasehold_limit AS l ON l.scope = k.value ->> '$.scope' AND l.name = k.value ->> '$.name'
ORDER BY k.key`

// limitSetWindowSQL records the rate window of limit row (?1, ?2): window
// start ?3, count ?4.
const limitSetWindowSQL = `UPDATE leasehold_limit
SET window_start = ?3, window_count = ?4, updated_at = ` + nowExpr + `
WHERE scope = ?1 AND name = ?2`

// errLimitLockPool is returned by LimitLock on the pool: the lock would end
// with the statement, before the caller could count and claim under it.
var errLimitLockPool = errors.New("leasehold/sqlite: LimitLock must run in a transaction (an executor from Begin)")

// JobCountRunning counts running jobs, by whether their lease expired:
// those of params.Queue and, per kind asked, those of that kind in every
// queue.
func (e *executor) JobCountRunning(ctx context.Context, params *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	out := &driver.RunningCount{
		Kinds:        make(map[string]int64, len(params.Kinds)),
		KindsExpired: make(map[string]int64, len(params.Kinds)),
	}
	if err := q.QueryRowContext(ctx, jobCountRunningQueueSQL, params.Queue).Scan(&out.Queue, &out.QueueExpired); err != nil {
		return nil, fmt.Errorf("count running jobs of queue %s: %w", params.Queue, err)
	}
	if len(params.Kinds) == 0 {
		return out, nil
	}
	kinds, err := jsonStrings(params.Kinds)
	if err != nil {
		return nil, fmt.Errorf("count running jobs: encode kinds: %w", err)
	}
	rows, err := q.QueryContext(ctx, jobCountRunningKindsSQL, kinds)
	if err != nil {
		return nil, fmt.Errorf("count running jobs by kind: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			kind          string
			live, expired int64
		)
		if err := rows.Scan(&kind, &live, &expired); err != nil {
			return nil, fmt.Errorf("count running jobs by kind: %w", err)
		}
		out.Kinds[kind], out.KindsExpired[kind] = live, expired
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count running jobs by kind: %w", err)
	}
	return out, nil
}

// limitKey is the JSON form of a driver.LimitKey for the limit statements.
type limitKey struct {
	Scope string `json:"scope"`
	Name  string `json:"name"`
}

// LimitLock creates the missing limit rows of keys and reads them in the
// order given, with the database clock. SQLite has one writer and the
// transaction took the write lock at BEGIN IMMEDIATE, so no other claimer
// can change the rows, or the running jobs, until it ends: there is nothing
// more to lock. It refuses to run on the pool, where that transaction would
// end with the call.
func (e *executor) LimitLock(ctx context.Context, params *driver.LimitLockParams) ([]*driver.LimitRow, error) {
	keys := params.Keys
	if e.onPool {
		return nil, fmt.Errorf("lock limits: %w", errLimitLockPool)
	}
	if len(keys) == 0 {
		return []*driver.LimitRow{}, nil
	}
	jk := make([]limitKey, len(keys))
	for i, k := range keys {
		jk[i] = limitKey{Scope: k.Scope, Name: k.Name}
	}
	keysJSON, err := json.Marshal(jk)
	if err != nil {
		return nil, fmt.Errorf("lock limits: encode: %w", err)
	}
	var out []*driver.LimitRow
	err = e.write(ctx, func(q querier) error {
		out = make([]*driver.LimitRow, 0, len(keys))
		if _, err := q.ExecContext(ctx, limitInsertMissingSQL, string(keysJSON)); err != nil {
			return fmt.Errorf("create limit rows: %w", err)
		}
		rows, err := q.QueryContext(ctx, limitReadSQL, string(keysJSON))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				start sql.NullInt64
				row   = &driver.LimitRow{}
			)
			if err := rows.Scan(&start, &row.WindowCount); err != nil {
				return err
			}
			row.WindowStart = nullTime(start)
			out = append(out, row)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) != len(keys) {
			return fmt.Errorf("read %d limit rows for %d keys", len(out), len(keys))
		}
		// The clock is read once the rows are held, as the contract asks;
		// on SQLite they were held from the transaction's start.
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for i, row := range out {
			row.Key = keys[i]
			row.Now = fromMicros(now)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lock limits: %w", err)
	}
	return out, nil
}

// LimitSetWindow records a limit row's rate window. The row is one LimitLock
// created; driver.ErrNotFound when it does not exist, as on Postgres.
func (e *executor) LimitSetWindow(ctx context.Context, params *driver.LimitSetWindowParams) error {
	err := e.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, limitSetWindowSQL, params.Key.Scope, params.Key.Name,
			params.WindowStart.UnixMicro(), params.WindowCount)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err == nil && n == 0 {
			err = driver.ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("set window of limit %s %s: %w", params.Key.Scope, params.Key.Name, err)
	}
	return nil
}
