package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
)

// errFastUniqueKey is returned by JobInsertFast for a job with a unique key.
var errFastUniqueKey = errors.New("leasehold/sqlite: JobInsertFast does not take jobs with a unique key; use JobInsertMany")

// JobInsertMany inserts jobs in one transaction and returns them in input
// order. A job whose unique key another job holds (an unfinished one, or a
// finished one whose unique_finished names its state) is skipped by the
// partial unique index and that job is returned instead, also for a key
// repeated within params.
func (e *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	if len(params.Jobs) == 0 {
		return []*driver.JobInsertResult{}, nil
	}
	out := make([]*driver.JobInsertResult, 0, len(params.Jobs))
	err := e.write(ctx, func(q querier) error {
		out = out[:0]
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for _, p := range params.Jobs {
			row := q.QueryRowContext(ctx, queryJobInsert,
				p.Kind, p.Queue, p.Priority, string(p.EncodedArgs), string(driver.MetadataOrEmpty(p.Metadata)),
				nullString(p.UniqueKey), p.MaxAttempts, millis(p.LeaseTTL), micros(p.ScheduledAt), now,
				driver.UniqueFinishedMask(p.UniqueFinished))
			job, err := scanJob(row)
			if err == nil {
				out = append(out, &driver.JobInsertResult{Job: job})
				continue
			}
			if !isNoRows(err) || p.UniqueKey == "" {
				return err
			}
			existing, err := scanJob(q.QueryRowContext(ctx, queryJobGetKeyHolder, p.UniqueKey))
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

// fastJob is the JSON form of a driver.JobInsertParams for queryJobInsertFast.
type fastJob struct {
	Kind        string `json:"kind"`
	Queue       string `json:"queue"`
	Priority    int    `json:"priority"`
	Args        string `json:"args"`
	Metadata    string `json:"metadata"`
	MaxAttempts int    `json:"max_attempts"`
	LeaseTTLMS  any    `json:"lease_ttl_ms"`
	ScheduledAt any    `json:"scheduled_at"`
	// UniqueFinished is stored for parity with JobInsertMany; without a
	// unique key it has no effect.
	UniqueFinished int `json:"unique_finished"`
}

// JobInsertFast inserts jobs with one INSERT ... SELECT from a JSON array,
// in one transaction, and returns the count. It refuses jobs with unique
// keys.
func (e *executor) JobInsertFast(ctx context.Context, params *driver.JobInsertFastParams) (int, error) {
	jobs := make([]fastJob, len(params.Jobs))
	for i, p := range params.Jobs {
		if p.UniqueKey != "" {
			return 0, errFastUniqueKey
		}
		jobs[i] = fastJob{Kind: p.Kind, Queue: p.Queue, Priority: p.Priority,
			Args: string(p.EncodedArgs), Metadata: string(driver.MetadataOrEmpty(p.Metadata)), MaxAttempts: p.MaxAttempts,
			LeaseTTLMS: millis(p.LeaseTTL), ScheduledAt: micros(p.ScheduledAt),
			UniqueFinished: driver.UniqueFinishedMask(p.UniqueFinished)}
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	jobsJSON, err := json.Marshal(jobs)
	if err != nil {
		return 0, fmt.Errorf("insert jobs: encode: %w", err)
	}
	var n int64
	err = e.write(ctx, func(q querier) error {
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		res, err := q.ExecContext(ctx, queryJobInsertFast, string(jobsJSON), now)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	return int(n), nil
}
