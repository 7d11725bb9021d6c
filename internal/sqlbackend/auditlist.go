package sqlbackend

import (
	"context"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// AuditListSQL is what a backend's audit listing has of its own.
type AuditListSQL struct {
	// Prefix selects the audit columns the backend's scan reads, with a
	// WHERE clause the filters extend with AND.
	Prefix string
	// Since is the filter on the entry's time, with one parameter, and
	// SinceArg turns the time into that parameter: the backends store
	// times differently.
	Since    string
	SinceArg func(params *driver.AuditListParams) any
}

// ListAudit runs the audit listing params asks for on q, newest first, and
// reads each entry with scan. Only the filters in use go into the
// statement. Errors come back unwrapped, for the backend to translate.
func ListAudit(ctx context.Context, q Querier, s *AuditListSQL, params *driver.AuditListParams, scan func(RowScanner) (*leasetype.AuditRow, error)) ([]*leasetype.AuditRow, error) {
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString(s.Prefix)
	if params.JobID > 0 {
		// A single job's entry names it; a bulk entry lists it.
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
		b.WriteString(s.Since)
		args = append(args, s.SinceArg(params))
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
	return QueryAll(ctx, q, scan, b.String(), args...)
}
