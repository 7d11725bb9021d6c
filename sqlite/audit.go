package sqlite

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// auditInsertSQL appends an audit entry timed by the database clock.
const auditInsertSQL = `INSERT INTO leasehold_audit (at, actor, action, queue, job_id, job_ids, count, note, detail)
VALUES (` + nowExpr + `, ?1, ?2, ?3, nullif(?4, 0), nullif(?5, ''), ?6, ?7, ?8)
RETURNING id`

// auditColumns are the columns scanAudit reads, in order.
const auditColumns = `id, at, actor, action, queue, coalesce(job_id, 0), coalesce(job_ids, ''), count, note, detail`

// AuditInsert appends an entry to the audit trail and returns its ID.
func (e *executor) AuditInsert(ctx context.Context, params *driver.AuditInsertParams) (int64, error) {
	var id int64
	err := e.write(ctx, func(q querier) error {
		return q.QueryRowContext(ctx, auditInsertSQL, params.Actor, params.Action, params.Queue, params.JobID,
			driver.EncodeAuditJobIDs(params.JobIDs), params.Count, params.Note, params.Detail).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", translateError(err))
	}
	return id, nil
}

// auditListSQL is this backend's part of the audit listing.
var auditListSQL = sqlbackend.AuditListSQL{
	Prefix:   `SELECT ` + auditColumns + ` FROM leasehold_audit WHERE 1`,
	Since:    ` AND at >= ?`,
	SinceArg: func(p *driver.AuditListParams) any { return p.Since.UnixMicro() },
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
		at     int64
		jobIDs string
	)
	if err := s.Scan(&r.ID, &at, &r.Actor, &r.Action, &r.Queue, &r.JobID, &jobIDs, &r.Count, &r.Note, &r.Detail); err != nil {
		return nil, err
	}
	r.At = fromMicros(at)
	r.JobIDs = driver.DecodeAuditJobIDs(jobIDs)
	return &r, nil
}
