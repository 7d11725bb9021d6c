package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// PeriodicEnsure registers schedule params.Name in one transaction: an
// upsert that keeps the row when its spec is unchanged, then a read of it.
func (e *executor) PeriodicEnsure(ctx context.Context, params *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error) {
	next := timeArg(&params.NextRunAt)
	var out *leasetype.PeriodicSchedule
	err := e.write(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, queryPeriodicEnsure, params.Name, params.Spec, next,
			params.Spec, next, params.Spec, params.Spec)
		if err != nil {
			return err
		}
		out, err = scanPeriodic(q.QueryRowContext(ctx, queryPeriodicGet, params.Name))
		return translate(err)
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
	rows, err := q.QueryContext(ctx, queryPeriodicList)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", translate(err))
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
		return nil, fmt.Errorf("list schedules: %w", translate(err))
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
	res, err := q.ExecContext(ctx, queryPeriodicAdvance,
		timeArg(&params.Next), timeArg(&params.SlotAt), lastJobID,
		params.Name, timeArg(&params.From), params.LeaderName, params.LeaderToken)
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", params.Name, translate(err))
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
