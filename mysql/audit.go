package mysql

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// auditInsertSQL appends an audit entry timed by the database clock.
const auditInsertSQL = `INSERT INTO leasehold_audit (at, actor, action, queue, job_id, job_ids, count, note, detail)
VALUES (` + nowExpr + `, ?, ?, ?, NULLIF(?, 0), NULLIF(?, ''), ?, ?, ?)`

// auditColumns are the columns scanAudit reads, in order.
const auditColumns = `id, at, actor, action, queue, COALESCE(job_id, 0), COALESCE(job_ids, ''), count, note, detail`

// AuditInsert appends an entry to the audit trail and returns its ID.
func (e *executor) AuditInsert(ctx context.Context, params *driver.AuditInsertParams) (int64, error) {
	q, err := e.read()
	if err != nil {
		return 0, err
	}
	res, err := q.ExecContext(ctx, auditInsertSQL, params.Actor, params.Action, params.Queue, params.JobID,
		driver.EncodeAuditJobIDs(params.JobIDs), params.Count, params.Note, params.Detail)
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", translateError(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", err)
	}
	return id, nil
}

// auditListSQL is this backend's part of the audit listing.
var auditListSQL = sqlbackend.AuditListSQL{
	Prefix:   `SELECT ` + auditColumns + ` FROM leasehold_audit WHERE TRUE`,
	Since:    ` AND at >= CAST(? AS DATETIME(6))`,
	SinceArg: func(p *driver.AuditListParams) any { return timeArg(&p.Since) },
}

// AuditList returns the audit entries matching the filter, newest first.
// Only the filters in use go into the statement.
func (e *executor) AuditList(ctx context.Context, params *driver.AuditListParams) ([]*leasetype.AuditRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := sqlbackend.ListAudit(ctx, q, &auditListSQL, params, scanAudit)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", translateError(err))
	}
	return rows, nil
}

func scanAudit(s sqlbackend.RowScanner) (*leasetype.AuditRow, error) {
	var (
		r      leasetype.AuditRow
		at     dbTime
		jobIDs string
	)
	if err := s.Scan(&r.ID, &at, &r.Actor, &r.Action, &r.Queue, &r.JobID, &jobIDs, &r.Count, &r.Note, &r.Detail); err != nil {
		return nil, err
	}
	r.At = at.Time
	r.JobIDs = driver.DecodeAuditJobIDs(jobIDs)
	return &r, nil
}
