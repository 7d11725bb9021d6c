package mysql

import (
	"context"
	"fmt"
	"strings"

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

// AuditList returns the audit entries matching the filter, newest first.
// Only the filters in use go into the statement.
func (e *executor) AuditList(ctx context.Context, params *driver.AuditListParams) ([]*leasetype.AuditRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString(`SELECT ` + auditColumns + ` FROM leasehold_audit WHERE TRUE`)
	if params.JobID > 0 {
		b.WriteString(` AND (job_id = ? OR (job_id IS NULL AND job_ids LIKE ?))`)
		args = append(args, params.JobID, driver.AuditJobPattern(params.JobID))
	}
	if params.Queue != "" {
		b.WriteString(` AND queue = ?`)
		args = append(args, params.Queue)
	}
	if params.Actor != "" {
		b.WriteString(` AND actor = ?`)
		args = append(args, params.Actor)
	}
	if !params.Since.IsZero() {
		b.WriteString(` AND at >= CAST(? AS DATETIME(6))`)
		args = append(args, timeArg(&params.Since))
	}
	if params.BeforeID > 0 {
		b.WriteString(` AND id < ?`)
		args = append(args, params.BeforeID)
	}
	limit := params.Limit
	if limit <= 0 {
		limit = driver.DefaultAuditListLimit
	}
	b.WriteString(` ORDER BY id DESC LIMIT ?`)
	args = append(args, limit)
	rows, err := sqlbackend.QueryAll(ctx, q, scanAudit, b.String(), args...)
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
