package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// auditInsertSQL appends an audit entry timed by the database clock.
const auditInsertSQL = `INSERT INTO leasehold_audit (actor, action, queue, job_id, job_ids, count, note, detail)
VALUES ($1, $2, $3, nullif($4::bigint, 0), nullif($5::text, ''), $6, $7, $8)
RETURNING id`

// auditColumns are the columns scanAudit reads, in order.
const auditColumns = `id, at, actor, action, queue, coalesce(job_id, 0), coalesce(job_ids, ''), count, note, detail`

// AuditInsert appends an entry to the audit trail and returns its ID.
func (e *executor) AuditInsert(ctx context.Context, params *driver.AuditInsertParams) (int64, error) {
	var id int64
	err := e.db.QueryRow(ctx, auditInsertSQL, params.Actor, params.Action, params.Queue, params.JobID,
		driver.EncodeAuditJobIDs(params.JobIDs), params.Count, params.Note, params.Detail).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("record audit entry: %w", translateError(err))
	}
	return id, nil
}

// AuditList returns the audit entries matching the filter, newest first.
// Only the filters in use go into the statement.
func (e *executor) AuditList(ctx context.Context, params *driver.AuditListParams) ([]*leasetype.AuditRow, error) {
	var (
		b    strings.Builder
		args []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	b.WriteString(`SELECT ` + auditColumns + ` FROM leasehold_audit WHERE true`)
	if params.JobID > 0 {
		// A single-job entry by the index; a bulk batch holding the job by
		// its ID list.
		b.WriteString(` AND (job_id = ` + arg(params.JobID) + ` OR (job_id IS NULL AND job_ids LIKE ` + arg(driver.AuditJobPattern(params.JobID)) + `))`)
	}
	if params.Queue != "" {
		b.WriteString(` AND queue = ` + arg(params.Queue))
	}
	if params.Actor != "" {
		b.WriteString(` AND actor = ` + arg(params.Actor))
	}
	if !params.Since.IsZero() {
		b.WriteString(` AND at >= ` + arg(params.Since))
	}
	if params.BeforeID > 0 {
		b.WriteString(` AND id < ` + arg(params.BeforeID))
	}
	limit := params.Limit
	if limit <= 0 {
		limit = driver.DefaultAuditListLimit
	}
	b.WriteString(` ORDER BY id DESC LIMIT ` + arg(limit))
	rows, err := e.db.Query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", translateError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*leasetype.AuditRow, error) {
		var (
			r   leasetype.AuditRow
			ids string
		)
		if err := row.Scan(&r.ID, &r.At, &r.Actor, &r.Action, &r.Queue, &r.JobID, &ids, &r.Count, &r.Note, &r.Detail); err != nil {
			return nil, err
		}
		r.At = r.At.UTC()
		r.JobIDs = driver.DecodeAuditJobIDs(ids)
		return &r, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list audit entries: %w", translateError(err))
	}
	return out, nil
}
