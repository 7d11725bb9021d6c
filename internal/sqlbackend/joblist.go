package sqlbackend

import (
	"context"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// defaultListLimit is the listing size when JobListParams.Limit is zero.
const defaultListLimit = 100

// JobListSQL is what a backend's job listing has of its own.
type JobListSQL struct {
	// Prefix selects the job columns the backend's scan reads, with a WHERE
	// clause the filters extend with AND.
	Prefix string
	// States returns the filter on states and its arguments: the backends
	// pass a list of states differently.
	States func(states []leasetype.JobState) (string, []any, error)
}

// The filters of a job listing that read the same in both backends, each
// with one parameter, and its order and limit.
const (
	jobListByQueue     = ` AND queue = ?`
	jobListByKind      = ` AND kind = ?`
	jobListByUniqueKey = ` AND unique_key = ?`
	jobListByKey       = ` AND flow_key = ?`
	jobListBySequence  = ` AND sequence_key = ?`
	jobListBeforeID    = ` AND id < ?`
	jobListSuffix      = ` ORDER BY id DESC LIMIT ?`
)

// ListJobs runs the listing params asks for on q, newest ID first, and
// reads each job with scan. Only the filters in use go into the statement,
// so each shape can use its index. Errors come back unwrapped, for the
// backend to translate.
func ListJobs(ctx context.Context, q Querier, s *JobListSQL, params *driver.JobListParams, scan func(RowScanner) (*leasetype.JobRow, error)) ([]*leasetype.JobRow, error) {
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString(s.Prefix)
	if len(params.States) > 0 {
		filter, stateArgs, err := s.States(params.States)
		if err != nil {
			return nil, err
		}
		b.WriteString(filter)
		args = append(args, stateArgs...)
	}
	for _, f := range []struct {
		sql   string
		value string
	}{
		{jobListByQueue, params.Queue},
		{jobListByKind, params.Kind},
		{jobListByUniqueKey, params.UniqueKey},
		{jobListByKey, params.Key},
		{jobListBySequence, params.Sequence},
	} {
		if f.value != "" {
			b.WriteString(f.sql)
			args = append(args, f.value)
		}
	}
	if params.BeforeID > 0 {
		b.WriteString(jobListBeforeID)
		args = append(args, params.BeforeID)
	}
	limit := params.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	b.WriteString(jobListSuffix)
	args = append(args, limit)
	return QueryAll(ctx, q, scan, b.String(), args...)
}
