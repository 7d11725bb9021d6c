package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// Schedule times are INTEGER microseconds like every other time column, so a
// NextRunAt the driver returned converts back (UnixMicro) to exactly the
// stored value, and PeriodicAdvance's equality test holds for it.

// periodicColumns are the schedule columns in the order scanPeriodic reads them.
const periodicColumns = `name, spec, next_run_at, last_run_at, last_job_id, updated_at`

// periodicEnsureSQL inserts schedule ?1 with spec ?2 and next run ?3, or,
// when it exists with another spec, sets both.
const periodicEnsureSQL = `INSERT INTO leasehold_periodic (name, spec, next_run_at, updated_at)
VALUES (?1, ?2, ?3, ` + nowExpr + `)
ON CONFLICT (name) DO UPDATE SET
	spec = excluded.spec,
	next_run_at = excluded.next_run_at,
	updated_at = excluded.updated_at
WHERE leasehold_periodic.spec <> excluded.spec`

// periodicGetSQL reads schedule ?1.
const periodicGetSQL = `SELECT ` + periodicColumns + ` FROM leasehold_periodic WHERE name = ?1`

// periodicListSQL reads every schedule in name order.
const periodicListSQL = `SELECT ` + periodicColumns + ` FROM leasehold_periodic ORDER BY name`

// periodicAdvanceSQL moves schedule ?1 from next run ?2 to ?3, recording
// last run ?4 and job ?5 (NULL when 0), only while leader lease ?6 is held
// with token ?7 and unexpired on the database clock: one compare-and-set
// fenced by the leader's token.
const periodicAdvanceSQL = `UPDATE leasehold_periodic
SET next_run_at = ?3, last_run_at = ?4, last_job_id = nullif(?5, 0), updated_at = ` + nowExpr + `
WHERE name = ?1 AND next_run_at = ?2
	AND EXISTS (SELECT 1 FROM leasehold_leader
		WHERE name = ?6 AND token = ?7 AND lease_until > ` + nowExpr + `)`

// PeriodicEnsure registers a schedule and returns its row after the call.
func (e *executor) PeriodicEnsure(ctx context.Context, params *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error) {
	var row *leasetype.PeriodicSchedule
	err := e.write(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, periodicEnsureSQL, params.Name, params.Spec,
			params.NextRunAt.UnixMicro()); err != nil {
			return err
		}
		var err error
		row, err = scanPeriodic(q.QueryRowContext(ctx, periodicGetSQL, params.Name))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ensure schedule %s: %w", params.Name, err)
	}
	return row, nil
}

// PeriodicList returns every schedule in name order.
func (e *executor) PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, periodicListSQL)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	defer rows.Close()
	out := []*leasetype.PeriodicSchedule{}
	for rows.Next() {
		row, err := scanPeriodic(rows)
		if err != nil {
			return nil, fmt.Errorf("list schedules: %w", err)
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return out, nil
}

// PeriodicAdvance moves a schedule to its next slot in one conditional
// UPDATE and reports whether it wrote.
func (e *executor) PeriodicAdvance(ctx context.Context, params *driver.PeriodicAdvanceParams) (bool, error) {
	var n int64
	err := e.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, periodicAdvanceSQL, params.Name, params.From.UnixMicro(),
			params.Next.UnixMicro(), params.SlotAt.UnixMicro(), params.LastJobID,
			params.LeaderName, params.LeaderToken)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", params.Name, err)
	}
	return n > 0, nil
}

// scanPeriodic reads a row selected with periodicColumns.
func scanPeriodic(s sqlbackend.RowScanner) (*leasetype.PeriodicSchedule, error) {
	var (
		row             leasetype.PeriodicSchedule
		next, updated   int64
		lastRun, lastID sql.NullInt64
	)
	if err := s.Scan(&row.Name, &row.Spec, &next, &lastRun, &lastID, &updated); err != nil {
		return nil, err
	}
	row.NextRunAt = fromMicros(next)
	row.LastRunAt = nullTime(lastRun)
	if lastID.Valid {
		id := lastID.Int64
		row.LastJobID = &id
	}
	row.UpdatedAt = fromMicros(updated)
	return &row, nil
}
