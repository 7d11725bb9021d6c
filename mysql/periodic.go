package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// periodicEnsureSQL inserts a schedule row, or changes spec and next run
// of an existing one whose spec differs. Arguments: name, spec, next run,
// spec, next run, spec, spec. spec is assigned last: MySQL applies the
// assignments left to right, so the tests before it read the old spec. The
// specs are compared as bytes (utf8mb4_bin ignores trailing spaces).
const periodicEnsureSQL = `INSERT INTO leasehold_periodic (name, spec, next_run_at, updated_at)
VALUES (?, ?, CAST(? AS DATETIME(6)), ` + nowExpr + `)
ON DUPLICATE KEY UPDATE
	next_run_at = IF(CAST(spec AS BINARY) = CAST(? AS BINARY), next_run_at, CAST(? AS DATETIME(6))),
	updated_at = IF(CAST(spec AS BINARY) = CAST(? AS BINARY), updated_at, ` + nowExpr + `),
	spec = ?`

// periodicColumns are the schedule columns in the order scanPeriodic reads
// them.
const periodicColumns = `name, spec, next_run_at, last_run_at, last_job_id, updated_at`

// periodicGetSQL reads one schedule row.
const periodicGetSQL = `SELECT ` + periodicColumns + ` FROM leasehold_periodic WHERE name = ?`

// periodicListSQL reads every schedule row in name order.
const periodicListSQL = `SELECT ` + periodicColumns + ` FROM leasehold_periodic ORDER BY name`

// periodicAdvanceSQL moves a schedule to its next slot while its stored
// next run is the one the caller read and the caller's leader lease is held
// and unexpired. Arguments: next, slot, last job ID or NULL, name, from,
// leader name, leader token. updated_at always changes (one microsecond on
// when the clock has not moved), so that a write is never reported as zero
// rows affected, which MySQL counts as changed rather than matched rows.
const periodicAdvanceSQL = `UPDATE leasehold_periodic
SET next_run_at = CAST(? AS DATETIME(6)),
	last_run_at = CAST(? AS DATETIME(6)),
	last_job_id = ?,
	updated_at = GREATEST(` + nowExpr + `, updated_at + INTERVAL 1 MICROSECOND)
WHERE name = ? AND next_run_at = CAST(? AS DATETIME(6))
	AND EXISTS (SELECT 1 FROM leasehold_leader l
		WHERE l.name = ? AND l.token = ? AND l.lease_until > ` + nowExpr + `)`

// PeriodicEnsure registers schedule params.Name in one transaction: an
// upsert that keeps the row when its spec is unchanged, then a read of it.
func (e *executor) PeriodicEnsure(ctx context.Context, params *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error) {
	next := timeArg(&params.NextRunAt)
	var out *leasetype.PeriodicSchedule
	err := e.write(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, periodicEnsureSQL, params.Name, params.Spec, next,
			params.Spec, next, params.Spec, params.Spec)
		if err != nil {
			return err
		}
		out, err = scanPeriodic(q.QueryRowContext(ctx, periodicGetSQL, params.Name))
		return translateError(err)
	})
	if err != nil {
		return nil, fmt.Errorf("ensure schedule %s: %w", params.Name, err)
	}
	return out, nil
}

// PeriodicList returns every schedule row in name order.
func (e *executor) PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, periodicListSQL)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.PeriodicSchedule{}
	for rows.Next() {
		r, err := scanPeriodic(rows)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", translateError(err))
	}
	return out, nil
}

// PeriodicAdvance moves schedule params.Name from params.From to
// params.Next in one conditional UPDATE, fenced by the leader lease, and
// reports whether it wrote.
func (e *executor) PeriodicAdvance(ctx context.Context, params *driver.PeriodicAdvanceParams) (bool, error) {
	q, err := e.read()
	if err != nil {
		return false, err
	}
	var lastJobID any
	if params.LastJobID != 0 {
		lastJobID = params.LastJobID
	}
	res, err := q.ExecContext(ctx, periodicAdvanceSQL,
		timeArg(&params.Next), timeArg(&params.SlotAt), lastJobID,
		params.Name, timeArg(&params.From), params.LeaderName, params.LeaderToken)
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", params.Name, translateError(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", params.Name, err)
	}
	return n > 0, nil
}

// scanPeriodic reads a row selected with periodicColumns.
func scanPeriodic(s sqlbackend.RowScanner) (*leasetype.PeriodicSchedule, error) {
	var (
		r                   leasetype.PeriodicSchedule
		next, last, updated dbTime
		lastJobID           sql.NullInt64
	)
	if err := s.Scan(&r.Name, &r.Spec, &next, &last, &lastJobID, &updated); err != nil {
		return nil, err
	}
	r.NextRunAt, r.LastRunAt, r.UpdatedAt = next.Time, last.ptr(), updated.Time
	if lastJobID.Valid {
		id := lastJobID.Int64
		r.LastJobID = &id
	}
	return &r, nil
}
