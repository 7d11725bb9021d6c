package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// heldKeyPredicate is the predicate of the partial unique index on
// unique_key (migration 3): every unfinished job holds its key, a finished
// one when its unique_finished bit for its state is set. A query repeats it
// verbatim so that the planner proves the index applies.
const heldKeyPredicate = `unique_key IS NOT NULL
	AND (state IN ('available', 'scheduled', 'running', 'retryable', 'stuck')
		OR (state = 'completed' AND unique_finished & 1 <> 0)
		OR (state = 'discarded' AND unique_finished & 2 <> 0)
		OR (state = 'cancelled' AND unique_finished & 4 <> 0))`

// jobInsertSQL inserts one job, skipping it when a job holding its unique
// key exists (the partial unique index; an upsert without a conflict target
// covers any unique index). ?1 kind, ?2 queue, ?3 priority, ?4 args, ?5
// metadata, ?6 unique key, ?7 max attempts, ?8 lease TTL in ms, ?9
// scheduled_at or NULL, ?10 now, ?11 the unique_finished bitmask, ?12 the
// flow key, ?13 the sequence key (NULL for none).
const jobInsertSQL = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_key, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at, unique_finished, flow_key, sequence_key)
VALUES (?1, ?2, CASE WHEN ?9 > ?10 THEN 'scheduled' ELSE 'available' END,
	?3, ?4, ?5, ?6, ?7, ?8, coalesce(?9, ?10), ?10, ?11, ?12, ?13)
ON CONFLICT DO NOTHING
RETURNING ` + jobColumns

// jobInsertLeasedSQL is jobInsertSQL for a job inserted leased
// (driver.LeasedInserter): running, leased to ?14 as the claim leases it
// (claimSetSQL), for ?15 ms with the stuck expiry policy when ?16, unless
// it is scheduled in the future or its queue is paused, when it goes in
// as jobInsertSQL puts it. The WHERE clause tells SQLite's parser that ON
// CONFLICT is not a join's ON.
const jobInsertLeasedSQL = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_key, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at, unique_finished, flow_key, sequence_key,
	 attempt, lease_token, lease_owner, leased_at, lease_until, expiry_policy)
SELECT ?1, ?2, CASE WHEN ?9 > ?10 THEN 'scheduled' WHEN l.leased THEN 'running' ELSE 'available' END,
	?3, ?4, ?5, ?6, ?7, ?8, coalesce(?9, ?10), ?10, ?11, ?12, ?13,
	l.leased, l.leased, CASE WHEN l.leased THEN ?14 END, CASE WHEN l.leased THEN ?10 END,
	CASE WHEN l.leased THEN ?10 + 1000 * ?15 END,
	CASE WHEN l.leased AND ?16 THEN 'stuck' ELSE 'retry' END
FROM (SELECT NOT coalesce(?9 > ?10, 0)
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?2 AND q.paused_at IS NOT NULL) AS leased) AS l
WHERE true
ON CONFLICT DO NOTHING
RETURNING ` + jobColumns

// jobGetKeyHolderSQL finds the job holding a unique key, by the rule of
// the unique index.
const jobGetKeyHolderSQL = `SELECT ` + jobColumns + `
FROM leasehold_job
WHERE unique_key = ?1 AND ` + heldKeyPredicate

// jobInsertFastSQL inserts the jobs of ?1, a JSON array of {"kind",
// "queue", "priority", "args", "metadata", "max_attempts", "lease_ttl_ms",
// "scheduled_at", "unique_finished", "flow_key", "sequence_key"} with args
// and metadata as JSON text, in one statement whatever their number; ?2 is
// now.
const jobInsertFastSQL = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at, unique_finished, flow_key, sequence_key)
SELECT p.kind, p.queue,
	CASE WHEN p.scheduled_at > ?2 THEN 'scheduled' ELSE 'available' END,
	p.priority, p.args, p.metadata, p.max_attempts, p.lease_ttl_ms,
	coalesce(p.scheduled_at, ?2), ?2, p.unique_finished, p.flow_key, p.sequence_key
FROM (
	SELECT value ->> '$.kind' AS kind, value ->> '$.queue' AS queue,
		value ->> '$.priority' AS priority, value ->> '$.args' AS args,
		value ->> '$.metadata' AS metadata, value ->> '$.max_attempts' AS max_attempts,
		value ->> '$.lease_ttl_ms' AS lease_ttl_ms, value ->> '$.scheduled_at' AS scheduled_at,
		value ->> '$.unique_finished' AS unique_finished,
		value ->> '$.flow_key' AS flow_key, value ->> '$.sequence_key' AS sequence_key,
		key AS n
	FROM json_each(?1)
) AS p
ORDER BY p.n`

// errFastUniqueKey is returned by JobInsertFast for a job with a unique key.
var errFastUniqueKey = errors.New("leasehold/sqlite: JobInsertFast does not take jobs with a unique key; use JobInsertMany")

// JobInsertMany inserts jobs in one transaction and returns them in input
// order. A job whose unique key another job holds (an unfinished one, or a
// finished one whose unique_finished names its state) is skipped by the
// partial unique index and that job is returned instead, also for a key
// repeated within params.
func (e *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	return e.insertLeased(ctx, params, nil)
}

var _ driver.LeasedInserter = (*executor)(nil)

// JobInsertLeased is JobInsertMany with the jobs lease selects inserted
// leased (jobInsertLeasedSQL), in the same write transaction.
func (e *executor) JobInsertLeased(ctx context.Context, params *driver.JobInsertManyParams, lease *driver.JobClaimParams) ([]*driver.JobInsertResult, error) {
	return e.insertLeased(ctx, params, driver.NewInsertLease(params.Jobs, lease))
}

// insertLeased is JobInsertMany, inserting the jobs lease marks leased
// (none when lease is nil).
func (e *executor) insertLeased(ctx context.Context, params *driver.JobInsertManyParams, lease *driver.InsertLease) ([]*driver.JobInsertResult, error) {
	if len(params.Jobs) == 0 {
		return []*driver.JobInsertResult{}, nil
	}
	deps := driver.HasDependencies(params.Jobs)
	if deps {
		if err := driver.ValidateDependencies(params.Jobs); err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
	}
	out := make([]*driver.JobInsertResult, 0, len(params.Jobs))
	wake := e.wakeSender(params.SenderTracker)
	err := e.write(ctx, func(q querier) error {
		out = out[:0]
		var queues []string // that got available jobs, to wake
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for i, p := range params.Jobs {
			query, args := jobInsertSQL, []any{
				p.Kind, p.Queue, p.Priority, string(p.EncodedArgs), string(driver.MetadataOrEmpty(p.Metadata)),
				nullString(p.UniqueKey), p.MaxAttempts, millis(p.LeaseTTL), micros(p.ScheduledAt), now,
				driver.UniqueFinishedMask(p.UniqueFinished), nullString(p.Key), nullString(p.Sequence),
			}
			if lease.Marked(i) {
				ttl, stuck := lease.Of(p)
				query, args = jobInsertLeasedSQL, append(args, lease.Claim.Owner, ttl.Milliseconds(), stuck)
			}
			row := q.QueryRowContext(ctx, query, args...)
			job, err := scanJob(row)
			if err == nil {
				out = append(out, &driver.JobInsertResult{Job: job})
				if job.State == leasetype.JobStateAvailable {
					queues = sqlbackend.AddQueue(queues, job.Queue)
				}
				continue
			}
			if !isNoRows(err) || p.UniqueKey == "" {
				return err
			}
			existing, err := scanJob(q.QueryRowContext(ctx, jobGetKeyHolderSQL, p.UniqueKey))
			if err != nil {
				return fmt.Errorf("read job with unique key %q: %w", p.UniqueKey, err)
			}
			out = append(out, &driver.JobInsertResult{Job: existing, UniqueSkipped: true})
		}
		if deps {
			if err := applyDependencies(ctx, q, now, params.Jobs, out); err != nil {
				return err
			}
		}
		return wakeQueues(ctx, q, wake, queues)
	})
	if err != nil {
		wake.Unsent()
		return nil, fmt.Errorf("insert jobs: %w", err)
	}
	return out, nil
}

// fastJob is the JSON form of a driver.JobInsertParams for jobInsertFastSQL.
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
	// FlowKey and SequenceKey are nil for none (NULL).
	FlowKey     any `json:"flow_key"`
	SequenceKey any `json:"sequence_key"`
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
			UniqueFinished: driver.UniqueFinishedMask(p.UniqueFinished),
			FlowKey:        nullString(p.Key), SequenceKey: nullString(p.Sequence)}
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	jobsJSON, err := json.Marshal(jobs)
	if err != nil {
		return 0, fmt.Errorf("insert jobs: encode: %w", err)
	}
	var n int64
	wake := e.wakeSender(params.SenderTracker)
	err = e.write(ctx, func(q querier) error {
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		res, err := q.ExecContext(ctx, jobInsertFastSQL, string(jobsJSON), now)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		var queues []string // that got available jobs (jobInsertFastSQL's rule), to wake
		for _, j := range jobs {
			if at, ok := j.ScheduledAt.(int64); !ok || at <= now {
				queues = sqlbackend.AddQueue(queues, j.Queue)
			}
		}
		return wakeQueues(ctx, q, wake, queues)
	})
	if err != nil {
		wake.Unsent()
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	return int(n), nil
}
