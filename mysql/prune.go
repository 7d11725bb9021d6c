package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
)

// Retention deletes old finished jobs and attempt rows. As
// everywhere in the package, a locking read picks the rows (with LIMIT and
// SKIP LOCKED, so concurrent pruners share the work) and the DELETE names
// them by primary key: a DELETE ... ORDER BY ... LIMIT would be
// nondeterministic under statement-based replication.

// jobPrunePickSQLFormat locks up to ?3 jobs in the states of the %s (placeholders
// after ?1) finalized more than ?1 microseconds before the database clock,
// oldest first, through the index on final_at (finalized_at while the job
// is completed, discarded or cancelled; NULL otherwise). Arguments: age in
// microseconds, the states, the limit.
const jobPrunePickSQLFormat = `SELECT id FROM leasehold_job
WHERE final_at < ` + nowExpr + ` - INTERVAL ? MICROSECOND AND state IN (%s)
ORDER BY final_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// jobPruneDeleteSQLFormat deletes the picked jobs (the %s: their IDs).
const jobPruneDeleteSQLFormat = `DELETE FROM leasehold_job WHERE id IN (%s)`

// attemptPrunePickSQL locks up to ?2 attempt rows that finished more than
// ?1 microseconds before the database clock, oldest first, through the index
// on finished_at.
const attemptPrunePickSQL = `SELECT job_id, token FROM leasehold_attempt
WHERE finished_at < ` + nowExpr + ` - INTERVAL ? MICROSECOND
ORDER BY finished_at
LIMIT ?
FOR UPDATE SKIP LOCKED`

// attemptPruneDeleteSQLFormat deletes the picked attempt rows (the %s: (job_id,
// token) pairs).
const attemptPruneDeleteSQLFormat = `DELETE FROM leasehold_attempt WHERE (job_id, token) IN (%s)`

// pruneDeleteBatch bounds the rows one DELETE names, to keep statements
// well under the 65,535 placeholders of a prepared statement (databases
// opened without interpolateParams).
const pruneDeleteBatch = 1000

// JobPrune deletes up to params.Limit jobs in params.States (completed,
// discarded or cancelled; other states are never pruned) finalized more
// than params.OlderThan ago, oldest first, in one transaction: a locking
// read of their IDs, then DELETEs by ID. Attempt rows stay. A limit below
// one deletes nothing, as on the other backends.
func (e *executor) JobPrune(ctx context.Context, params *driver.JobPruneParams) (int64, error) {
	var states []any
	for _, s := range params.States {
		if s.Finalized() {
			states = append(states, string(s))
		}
	}
	if len(states) == 0 || params.Limit < 1 {
		return 0, nil
	}
	pickSQL := fmt.Sprintf(jobPrunePickSQLFormat, placeholders(len(states)))
	args := append(append([]any{params.OlderThan.Microseconds()}, states...), params.Limit)
	var deleted int64
	err := e.write(ctx, func(q querier) error {
		deleted = 0
		rows, err := q.QueryContext(ctx, pickSQL, args...)
		if err != nil {
			return err
		}
		ids, err := sqlbackend.ScanIDs(rows)
		if err != nil {
			return err
		}
		for len(ids) > 0 {
			batch := ids[:min(len(ids), pruneDeleteBatch)]
			ids = ids[len(batch):]
			res, err := q.ExecContext(ctx, fmt.Sprintf(jobPruneDeleteSQLFormat, placeholders(len(batch))), idArgs(batch)...)
			if err := addAffected(&deleted, res, err); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune jobs: %w", translateError(err))
	}
	return deleted, nil
}

// AttemptPrune deletes up to params.Limit attempt rows that finished more
// than params.OlderThan ago, oldest first, in one transaction: a locking
// read of their keys, then DELETEs by key. A limit below one deletes
// nothing.
func (e *executor) AttemptPrune(ctx context.Context, params *driver.AttemptPruneParams) (int64, error) {
	if params.Limit < 1 {
		return 0, nil
	}
	var deleted int64
	err := e.write(ctx, func(q querier) error {
		deleted = 0
		rows, err := q.QueryContext(ctx, attemptPrunePickSQL, params.OlderThan.Microseconds(), params.Limit)
		if err != nil {
			return err
		}
		keys, err := scanAttemptKeys(rows)
		if err != nil {
			return err
		}
		for len(keys) > 0 {
			batch := keys[:min(len(keys), pruneDeleteBatch)]
			keys = keys[len(batch):]
			args := make([]any, 0, 2*len(batch))
			for _, k := range batch {
				args = append(args, k.jobID, k.token)
			}
			query := fmt.Sprintf(attemptPruneDeleteSQLFormat, strings.TrimSuffix(strings.Repeat("(?, ?), ", len(batch)), ", "))
			res, err := q.ExecContext(ctx, query, args...)
			if err := addAffected(&deleted, res, err); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("prune attempts: %w", translateError(err))
	}
	return deleted, nil
}

// attemptKey is an attempt row's primary key.
type attemptKey struct {
	jobID, token int64
}

// scanAttemptKeys reads (job_id, token) rows and closes rows.
func scanAttemptKeys(rows *sql.Rows) ([]attemptKey, error) {
	defer rows.Close()
	var keys []attemptKey
	for rows.Next() {
		var k attemptKey
		if err := rows.Scan(&k.jobID, &k.token); err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// addAffected adds a DELETE's affected rows to n, or returns its error.
func addAffected(n *int64, res sql.Result, err error) error {
	if err != nil {
		return err
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return err
	}
	*n += rows
	return nil
}
