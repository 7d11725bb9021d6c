package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobInsertSQL inserts one job: kind, queue, scheduled_at (for the state),
// priority, args, metadata, unique key, unique_finished, max attempts, lease
// TTL in ms, scheduled_at again (NULL means now), flow key, sequence key.
// A job whose unique key another job holds fails with a duplicate-key error
// on unique_key_active.
const jobInsertSQL = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_key, unique_finished,
	 max_attempts, lease_ttl_ms, scheduled_at, created_at, flow_key, sequence_key)
VALUES (?, ?, IF(CAST(? AS DATETIME(6)) > ` + nowExpr + `, 'scheduled', 'available'),
	?, ?, ?, ?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), ` + nowExpr + `), ` + nowExpr + `, ?, ?)`

// jobInsertLeasedSQL is jobInsertSQL for a job inserted leased
// (driver.LeasedInserter): running, leased as the claim leases it
// (jobClaimUpdateSQLFormat), unless it is scheduled in the future or its
// queue is paused, when it goes in as jobInsertSQL puts it. Arguments:
// jobInsertSQL's, then the owner, the lease TTL in microseconds and
// whether the stuck expiry policy applies, then scheduled_at twice and the
// queue for the lease's conditions. UTC_TIMESTAMP(6) is the statement's
// start throughout.
const jobInsertLeasedSQL = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_key, unique_finished,
	 max_attempts, lease_ttl_ms, scheduled_at, created_at, flow_key, sequence_key,
	 attempt, lease_token, lease_owner, leased_at, lease_until, expiry_policy)
SELECT ?, ?, IF(CAST(? AS DATETIME(6)) > ` + nowExpr + `, 'scheduled', IF(l.leased, 'running', 'available')),
	?, ?, ?, ?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), ` + nowExpr + `), ` + nowExpr + `, ?, ?,
	IF(l.leased, 1, 0), IF(l.leased, 1, 0), IF(l.leased, ?, NULL), IF(l.leased, ` + nowExpr + `, NULL),
	IF(l.leased, ` + nowExpr + ` + INTERVAL ? MICROSECOND, NULL), IF(l.leased AND ?, 'stuck', 'retry')
FROM (SELECT (CAST(? AS DATETIME(6)) IS NULL OR CAST(? AS DATETIME(6)) <= ` + nowExpr + `)
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL) AS leased) AS l`

// jobInsertFastRow is one row of jobInsertFastSQL, with the same arguments
// as jobInsertSQL less the unique key.
const jobInsertFastRow = `(?, ?, IF(CAST(? AS DATETIME(6)) > ` + nowExpr + `, 'scheduled', 'available'),
	?, ?, ?, ?, ?, ?, COALESCE(CAST(? AS DATETIME(6)), ` + nowExpr + `), ` + nowExpr + `, ?, ?)`

// jobInsertFastSQL starts a multi-row insert; JobInsertFast appends its
// rows (jobInsertFastRow) separated by commas.
const jobInsertFastSQL = `INSERT INTO leasehold_job
	(kind, queue, state, priority, args, metadata, unique_finished, max_attempts,
	 lease_ttl_ms, scheduled_at, created_at, flow_key, sequence_key)
VALUES `

// jobGetKeyHolderSQL finds the job holding a unique key: the one whose
// unique_key_active is set, by the same rule as the unique index (unfinished,
// or finished in a state its unique_finished names). It is a locking read,
// so it sees the latest committed holder even inside a REPEATABLE READ
// transaction whose snapshot predates it.
const jobGetKeyHolderSQL = `SELECT ` + jobColumns + `
FROM leasehold_job WHERE unique_key_active = ? LOCK IN SHARE MODE`

// jobsByIDsSQL reads jobs by ID; the caller appends the ID list and ")".
const jobsByIDsSQL = `SELECT ` + jobColumns + ` FROM leasehold_job WHERE id IN (`

// maxInsertRounds bounds the retries of one job's insert. A round is retried
// only when the job holding its unique key released it between the insert
// and the lookup, so more than a couple of rounds means something is wrong.
const maxInsertRounds = 16

// fastBatchRows bounds the rows of one multi-row INSERT in JobInsertFast, and
// fastBatchBytes their args and metadata, to stay well under the server's
// max_allowed_packet (16 MiB on MariaDB, 64 MiB on MySQL 8 by default).
const (
	fastBatchRows  = 500
	fastBatchBytes = 4 << 20
)

// errFastUniqueKey is returned by JobInsertFast for a job with a unique key.
var errFastUniqueKey = errors.New("leasehold/mysql: JobInsertFast does not take jobs with a unique key; use JobInsertMany")

// JobInsertMany inserts jobs in one transaction and returns them in input
// order. MySQL has no INSERT ... RETURNING and gives a multi-row insert no
// reliable per-row IDs (innodb_autoinc_lock_mode=2 interleaves them), so each
// job is one INSERT, its ID from the insert, and the rows are read back in
// one SELECT at the end. A job whose unique key another job holds (an
// unfinished one, or a finished one whose unique_finished names its state)
// fails on the unique index of unique_key_active (a statement-level error;
// the transaction goes on) and the holder is returned instead, also for a
// key repeated within params.
func (e *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	return e.insertLeased(ctx, params, nil)
}

var _ driver.LeasedInserter = (*executor)(nil)

// JobInsertLeased is JobInsertMany with the jobs lease selects inserted
// leased (jobInsertLeasedSQL), in the same transaction.
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
	var out []*driver.JobInsertResult
	wake := e.wakeSender(params.SenderTracker)
	err := e.write(ctx, func(q querier) error {
		wake.Unsent() // of an attempt rolled back as a deadlock victim
		out = make([]*driver.JobInsertResult, len(params.Jobs))
		var ids []int64
		for i, p := range params.Jobs {
			id, existing, err := insertOne(ctx, q, p, lease, i)
			if err != nil {
				return err
			}
			if existing != nil {
				out[i] = &driver.JobInsertResult{Job: existing, UniqueSkipped: true}
				continue
			}
			ids = append(ids, id)
			out[i] = &driver.JobInsertResult{Job: &leasetype.JobRow{ID: id}}
		}
		if deps {
			if err := applyDependencies(ctx, q, params.Jobs, out); err != nil {
				return err
			}
		}
		if len(ids) == 0 {
			return nil
		}
		jobs, err := jobsByID(ctx, q, ids)
		if err != nil {
			return fmt.Errorf("read inserted jobs: %w", err)
		}
		var queues []string // that got available jobs, to wake
		for _, r := range out {
			if r.UniqueSkipped {
				continue
			}
			job, ok := jobs[r.Job.ID]
			if !ok {
				return fmt.Errorf("read inserted jobs: job %d missing", r.Job.ID)
			}
			r.Job = job
			if job.State == leasetype.JobStateAvailable {
				queues = sqlbackend.AddQueue(queues, job.Queue)
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

// insertOne inserts one job, the i-th, leased when lease marks it, and
// returns its ID, or the job that holds its unique key.
func insertOne(ctx context.Context, q querier, p *driver.JobInsertParams, lease *driver.InsertLease, i int) (int64, *leasetype.JobRow, error) {
	query, args := jobInsertSQL, []any{
		p.Kind, p.Queue, timeArg(p.ScheduledAt), priorityOrDefault(p.Priority),
		string(p.EncodedArgs), string(driver.MetadataOrEmpty(p.Metadata)), nullString(p.UniqueKey),
		driver.UniqueFinishedMask(p.UniqueFinished), p.MaxAttempts, leaseTTLArg(p.LeaseTTL),
		timeArg(p.ScheduledAt), nullString(p.Key), nullString(p.Sequence),
	}
	if lease.Marked(i) {
		ttl, stuck := lease.Of(p)
		query, args = jobInsertLeasedSQL, append(args, lease.Claim.Owner, ttl.Microseconds(), stuck,
			timeArg(p.ScheduledAt), timeArg(p.ScheduledAt), p.Queue)
	}
	for round := 0; round < maxInsertRounds; round++ {
		res, err := q.ExecContext(ctx, query, args...)
		if err == nil {
			id, err := res.LastInsertId()
			return id, nil, err
		}
		if !isDuplicate(err) || p.UniqueKey == "" {
			return 0, nil, err
		}
		existing, err := scanJob(q.QueryRowContext(ctx, jobGetKeyHolderSQL, p.UniqueKey))
		if err == nil {
			return 0, existing, nil
		}
		if !isNoRows(err) {
			return 0, nil, fmt.Errorf("read job with unique key %q: %w", p.UniqueKey, err)
		}
		// The holder released the key in between (it finished, or was
		// deleted): the key is free again.
	}
	return 0, nil, fmt.Errorf("unique key %q still contended after %d rounds", p.UniqueKey, maxInsertRounds)
}

// JobInsertFast inserts jobs with multi-row INSERTs in one transaction and
// returns the count. It refuses jobs with unique keys.
func (e *executor) JobInsertFast(ctx context.Context, params *driver.JobInsertFastParams) (int, error) {
	for _, p := range params.Jobs {
		if p.UniqueKey != "" {
			return 0, errFastUniqueKey
		}
	}
	if len(params.Jobs) == 0 {
		return 0, nil
	}
	var n int64
	wake := e.wakeSender(params.SenderTracker)
	err := e.write(ctx, func(q querier) error {
		wake.Unsent() // of an attempt rolled back as a deadlock victim
		n = 0
		for start := 0; start < len(params.Jobs); {
			var (
				b     strings.Builder
				args  []any
				bytes int
				end   = start
			)
			b.WriteString(jobInsertFastSQL)
			for end < len(params.Jobs) && end-start < fastBatchRows && (end == start || bytes < fastBatchBytes) {
				p := params.Jobs[end]
				if end > start {
					b.WriteString(", ")
				}
				b.WriteString(jobInsertFastRow)
				args = append(args, p.Kind, p.Queue, timeArg(p.ScheduledAt), priorityOrDefault(p.Priority),
					string(p.EncodedArgs), string(driver.MetadataOrEmpty(p.Metadata)),
					driver.UniqueFinishedMask(p.UniqueFinished), p.MaxAttempts,
					leaseTTLArg(p.LeaseTTL), timeArg(p.ScheduledAt), nullString(p.Key), nullString(p.Sequence))
				bytes += len(p.EncodedArgs) + len(p.Metadata)
				end++
			}
			res, err := q.ExecContext(ctx, b.String(), args...)
			if err != nil {
				return err
			}
			rows, err := res.RowsAffected()
			if err != nil {
				return err
			}
			n += rows
			start = end
		}
		queues, err := availableQueues(ctx, q, params.Jobs)
		if err != nil {
			return err
		}
		return wakeQueues(ctx, q, wake, queues)
	})
	if err != nil {
		wake.Unsent()
		return 0, fmt.Errorf("insert jobs: %w", err)
	}
	return int(n), nil
}

// jobsByID reads the jobs with the given IDs, by ID.
func jobsByID(ctx context.Context, q querier, ids []int64) (map[int64]*leasetype.JobRow, error) {
	rows, err := q.QueryContext(ctx, jobsByIDsSQL+placeholders(len(ids))+")", idArgs(ids)...)
	if err != nil {
		return nil, err
	}
	jobs, err := sqlbackend.ScanAll(rows, scanJob)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]*leasetype.JobRow, len(jobs))
	for _, j := range jobs {
		out[j.ID] = j
	}
	return out, nil
}

// priorityOrDefault maps the zero priority to the column default, 1.
func priorityOrDefault(p int) int {
	if p == 0 {
		return 1
	}
	return p
}
