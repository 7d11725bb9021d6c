package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// periodicColumns is the select list scanPeriodic reads.
const periodicColumns = `name, spec, next_run_at, last_run_at, last_job_id, updated_at`

// periodicEnsureSQL registers schedule $1 with spec $2 and first slot $3. An
// existing row keeps its stored slot unless its spec changed: a restart
// must not skip or repeat a slot. It returns the row only when it wrote.
const periodicEnsureSQL = `
INSERT INTO leasehold_periodic AS p (name, spec, next_run_at, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (name) DO UPDATE SET
	spec = excluded.spec,
	next_run_at = excluded.next_run_at,
	updated_at = excluded.updated_at
WHERE p.spec <> excluded.spec
RETURNING ` + periodicColumns

// periodicGetSQL reads schedule $1.
const periodicGetSQL = `SELECT ` + periodicColumns + ` FROM leasehold_periodic WHERE name = $1`

// periodicListSQL reads every schedule.
const periodicListSQL = `SELECT ` + periodicColumns + ` FROM leasehold_periodic ORDER BY name`

// periodicAdvanceSQL moves schedule $1 from slot $2 to $3, recording slot $4
// and job $5 (NULL for 0), in one conditional write: a compare-and-set on
// the stored slot, fenced by leader lease $6 held with token $7. Two leaders
// that both believe they lead cannot both advance one slot: the second
// waits for the first's row lock, then finds the slot moved. The clock is
// clock_timestamp(): the advance runs late in the transaction that inserts
// the slot's job, and a lease that expired meanwhile must not count.
const periodicAdvanceSQL = `
UPDATE leasehold_periodic SET
	next_run_at = $3,
	last_run_at = $4,
	last_job_id = nullif($5::bigint, 0),
	updated_at = clock_timestamp()
WHERE name = $1
	AND next_run_at = $2
	AND EXISTS (
		SELECT 1 FROM leasehold_leader
		WHERE name = $6 AND token = $7 AND lease_until > clock_timestamp())`

func (e *executor) PeriodicEnsure(ctx context.Context, params *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error) {
	row, err := scanPeriodic(e.db.QueryRow(ctx, periodicEnsureSQL, params.Name, params.Spec, params.NextRunAt))
	if err == nil {
		return row, nil
	}
	if err = translateError(err); !errors.Is(err, driver.ErrNotFound) {
		return nil, fmt.Errorf("ensure schedule %s: %w", params.Name, err)
	}
	// The row exists with the same spec and was left as it is.
	row, err = scanPeriodic(e.db.QueryRow(ctx, periodicGetSQL, params.Name))
	if err != nil {
		return nil, fmt.Errorf("read schedule %s: %w", params.Name, translateError(err))
	}
	return row, nil
}

func (e *executor) PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	rows, err := e.db.Query(ctx, periodicListSQL)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", translateError(err))
	}
	defer rows.Close()
	out := []*leasetype.PeriodicSchedule{}
	for rows.Next() {
		p, err := scanPeriodic(rows)
		if err != nil {
			return nil, fmt.Errorf("scan schedule: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list schedules: %w", translateError(err))
	}
	return out, nil
}

func (e *executor) PeriodicAdvance(ctx context.Context, params *driver.PeriodicAdvanceParams) (bool, error) {
	tag, err := e.db.Exec(ctx, periodicAdvanceSQL, params.Name, params.From, params.Next,
		params.SlotAt, params.LastJobID, params.LeaderName, params.LeaderToken)
	if err != nil {
		return false, fmt.Errorf("advance schedule %s: %w", params.Name, translateError(err))
	}
	return tag.RowsAffected() == 1, nil
}

// scanPeriodic reads one row selected with periodicColumns.
func scanPeriodic(row interface{ Scan(...any) error }) (*leasetype.PeriodicSchedule, error) {
	var (
		p     leasetype.PeriodicSchedule
		jobID pgtype.Int8
	)
	if err := row.Scan(&p.Name, &p.Spec, &p.NextRunAt, &p.LastRunAt, &jobID, &p.UpdatedAt); err != nil {
		return nil, err
	}
	p.NextRunAt = p.NextRunAt.UTC()
	p.LastRunAt = utcPtr(p.LastRunAt)
	p.UpdatedAt = p.UpdatedAt.UTC()
	if jobID.Valid {
		p.LastJobID = &jobID.Int64
	}
	return &p, nil
}
