package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
)

// errFastUniqueKey is returned by JobInsertFast for a job with a unique key.
var errFastUniqueKey = errors.New("leasehold/sqlite: JobInsertFast does not take jobs with a unique key; use JobInsertMany")

// fastInsertChunk bounds the rows of one multi-row insert, keeping its
// parameters (12 a row) under SQLite's limit of 32766.
const fastInsertChunk = 1000

// JobInsertMany inserts jobs in one transaction and returns them in input
// order. A job whose unique key an unfinished job holds is skipped by the
// partial unique index and that job is returned instead, also for a key
// repeated within params.
func (e *executor) JobInsertMany(ctx context.Context, params []*driver.JobInsertParams) ([]*driver.JobInsertResult, error) {
	if len(params) == 0 {
		return []*driver.JobInsertResult{}, nil
	}
	out := make([]*driver.JobInsertResult, 0, len(params))
	err := e.write(ctx, func(q querier) error {
		out = out[:0]
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for _, p := range params {
			row := q.QueryRowContext(ctx, queryJobInsert,
				p.Kind, p.Queue, p.Priority, string(p.EncodedArgs), metadata(p.Metadata),
				nullString(p.UniqueKey), p.MaxAttempts, millis(p.LeaseTTL), micros(p.ScheduledAt), now)
			job, err := scanJob(row)
			if err == nil {
				out = append(out, &driver.JobInsertResult{Job: job})
				continue
			}
			if !isNoRows(err) || p.UniqueKey == "" {
				return err
			}
			existing, err := scanJob(q.QueryRowContext(ctx, queryJobGetUnfinishedByKey, p.UniqueKey))
			if err != nil {
				return fmt.Errorf("read job with unique key %q: %w", p.UniqueKey, err)
			}
			out = append(out, &driver.JobInsertResult{Job: existing, UniqueSkipped: true})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return out, nil
}

// JobInsertFast inserts jobs with multi-row inserts in one transaction and
// returns the count. It refuses jobs with unique keys.
func (e *executor) JobInsertFast(ctx context.Context, params []*driver.JobInsertParams) (int, error) {
	for _, p := range params {
		if p.UniqueKey != "" {
			return 0, errFastUniqueKey
		}
	}
	if len(params) == 0 {
		return 0, nil
	}
	var n int
	err := e.write(ctx, func(q querier) error {
		n = 0
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for start := 0; start < len(params); start += fastInsertChunk {
			chunk := params[start:min(start+fastInsertChunk, len(params))]
			var b strings.Builder
			b.WriteString(queryJobInsertFastPrefix)
			args := make([]any, 0, 12*len(chunk))
			for i, p := range chunk {
				if i > 0 {
					b.WriteString(",\n")
				}
				b.WriteString(jobInsertFastRow)
				sched := micros(p.ScheduledAt)
				args = append(args, p.Kind, p.Queue, sched, now, p.Priority,
					string(p.EncodedArgs), metadata(p.Metadata), p.MaxAttempts,
					millis(p.LeaseTTL), sched, now, now)
			}
			res, err := q.ExecContext(ctx, b.String(), args...)
			if err != nil {
				return err
			}
			affected, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += int(affected)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	return n, nil
}

// metadata stores missing metadata as an empty JSON object.
func metadata(b []byte) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}
