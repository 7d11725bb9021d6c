package sqlbackend

import (
	"context"
	"database/sql"
	"slices"

	"github.com/leasehold/leasehold/leasetype"
)

// RowScanner is *sql.Row or *sql.Rows.
type RowScanner interface {
	Scan(dest ...any) error
}

// Querier runs a query that returns rows: a backend's pool, transaction or
// statement cache.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// QueryAll runs query on q and reads every row with scan. Errors come back
// as the database reported them, for the backend to translate.
func QueryAll[T any](ctx context.Context, q Querier, scan func(RowScanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return ScanAll(rows, scan)
}

// ScanAll reads every row of rows with scan and closes rows. With no rows it
// returns an empty slice, not nil, which callers return as an empty result.
func ScanAll[T any](rows *sql.Rows, scan func(RowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ScanQueueStateCount reads a (queue, state, count) row.
func ScanQueueStateCount(s RowScanner) (*leasetype.QueueStateCount, error) {
	var (
		c     leasetype.QueueStateCount
		state string
	)
	if err := s.Scan(&c.Queue, &state, &c.Count); err != nil {
		return nil, err
	}
	c.State = leasetype.JobState(state)
	return &c, nil
}

// ScanIDs reads a column of IDs and closes rows.
func ScanIDs(rows *sql.Rows) ([]int64, error) {
	return ScanAll(rows, scanID)
}

// scanID reads a row of one ID.
func scanID(s RowScanner) (int64, error) {
	var id int64
	err := s.Scan(&id)
	return id, err
}

// LeadScanner scans a row's leading columns into Lead and the rest into the
// destinations its caller passes, so that a row scanner of the job columns
// reads rows that start with columns of their own.
type LeadScanner struct {
	S    RowScanner
	Lead []any
}

// Scan implements RowScanner.
func (l LeadScanner) Scan(dest ...any) error {
	return l.S.Scan(append(slices.Clip(l.Lead), dest...)...)
}
