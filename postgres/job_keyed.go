package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobClaimKeyedSQL is the claim with per-key flow control. It runs in the
// limited claim's transaction, after the limit rows are locked, so no other
// keyed claim of the queue (or of a key-limited kind) runs between its
// counts and its update.
//
// cand holds the claimable jobs of queue $1 as the plain claim filters them
// (kinds $8, not $9, queue not paused), less the sequenced jobs that must
// wait: one whose sequence has a running job, or an earlier job that is
// unfinished, stuck, or (unless its kind is in $17) discarded or
// cancelled. Each gets its rank within its key (NULL keys form one group)
// in claim order. used holds, for each key in cand, its running jobs with
// an unexpired lease in the queue and, when $11 > 0, of the one kind $8 in
// every queue, and its starts in the rate window ($12, $13, window start
// $14). A keyed job is picked while its rank fits under every limit: queue
// key limit $10, kind key limit $11, rate $15 (zero: none). $16 orders the
// picks round-robin across keys: by rank plus the key's running jobs (a key
// with jobs running ranks behind one with none, so small claims rotate
// too), then claim order.
//
// The picked rows are locked with SKIP LOCKED (a row an operator's action
// holds is left for the next claim) and leased as the plain claim leases.
const jobClaimKeyedSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS run_now),
cand AS MATERIALIZED (
	SELECT j.id, j.flow_key, j.priority, j.scheduled_at,
		row_number() OVER (PARTITION BY j.flow_key ORDER BY j.priority, j.scheduled_at, j.id) AS key_rank
	FROM leasehold_job j
	WHERE j.state IN ('available', 'scheduled', 'retryable')
		AND j.queue = $1
		AND j.scheduled_at <= now()
		AND (cardinality($8::text[]) = 0 OR j.kind = ANY($8::text[]))
		AND j.kind <> ALL($9::text[])
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
		AND (j.sequence_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM leasehold_job p
			WHERE p.sequence_key = j.sequence_key AND p.id <> j.id
				AND (p.state = 'running'
					OR p.id < j.id AND (p.state IN ('available', 'scheduled', 'retryable', 'stuck')
						OR p.state IN ('discarded', 'cancelled') AND j.kind <> ALL($17::text[])))))
),
used AS MATERIALIZED (
	SELECT k.flow_key,
		CASE WHEN $10::int > 0 OR $16::boolean THEN (SELECT count(*) FROM leasehold_job r, clock
			WHERE r.flow_key = k.flow_key AND r.state = 'running' AND r.queue = $1
				AND r.lease_until > clock.run_now) ELSE 0 END AS queue_running,
		CASE WHEN $11::int > 0 THEN (SELECT count(*) FROM leasehold_job r, clock
			WHERE r.flow_key = k.flow_key AND r.state = 'running' AND r.kind = ($8::text[])[1]
				AND r.lease_until > clock.run_now) ELSE 0 END AS kind_running,
		CASE WHEN $15::int > 0 THEN coalesce((SELECT w.window_count FROM leasehold_key_window w
			WHERE w.scope = $12 AND w.name = $13 AND w.flow_key = k.flow_key
				AND w.window_start = $14::timestamptz), 0) ELSE 0 END AS window_used
	FROM (SELECT DISTINCT flow_key FROM cand WHERE flow_key IS NOT NULL) AS k
),
picked AS (
	SELECT c.id
	FROM cand c LEFT JOIN used u ON u.flow_key = c.flow_key
	WHERE c.flow_key IS NULL OR (
		($10::int = 0 OR c.key_rank <= $10::int - u.queue_running)
		AND ($11::int = 0 OR c.key_rank <= $11::int - u.kind_running)
		AND ($15::int = 0 OR c.key_rank <= $15::int - u.window_used))
	ORDER BY CASE WHEN $16::boolean THEN c.key_rank + coalesce(u.queue_running, 0) ELSE 0 END, c.priority, c.scheduled_at, c.id
	LIMIT $2
),
locked AS MATERIALIZED (
	SELECT ctid AS picked_ctid FROM leasehold_job
	WHERE id IN (SELECT id FROM picked)
	FOR UPDATE SKIP LOCKED
)
` + jobLeaseSetSQL + `FROM locked
WHERE leasehold_job.ctid = locked.picked_ctid
RETURNING ` + jobColumns

// keyWindowAddSQL adds starts ($5 keys, $6 counts) to the rate windows of
// scope ($1, $2) for the window from $3 to $4: a key's row is created, or
// restarted when it holds an older window, or added to.
const keyWindowAddSQL = `
INSERT INTO leasehold_key_window AS w (scope, name, flow_key, window_start, window_end, window_count)
SELECT $1, $2, s.key, $3, $4, s.n FROM unnest($5::text[], $6::bigint[]) AS s(key, n)
ON CONFLICT (scope, name, flow_key) DO UPDATE SET
	window_count = CASE WHEN w.window_start = EXCLUDED.window_start
		THEN w.window_count + EXCLUDED.window_count ELSE EXCLUDED.window_count END,
	window_start = EXCLUDED.window_start,
	window_end = EXCLUDED.window_end`

// keyWindowPruneSQL deletes up to $1 rate windows that ended.
const keyWindowPruneSQL = `
DELETE FROM leasehold_key_window
WHERE (scope, name, flow_key) IN (
	SELECT scope, name, flow_key FROM leasehold_key_window
	WHERE window_end < clock_timestamp()
	LIMIT $1)`

// sequenceBlockedSQL lists the sequences whose oldest job not completed is
// discarded, cancelled or stuck while a later job waits; $1 keeps one queue
// when not empty, $2 is the most rows.
const sequenceBlockedSQL = `
SELECT h.sequence_key,
	(SELECT count(*) FROM leasehold_job w
	 WHERE w.sequence_key = h.sequence_key AND w.id > h.id
		AND w.state IN ('available', 'scheduled', 'retryable', 'running')),
	` + jobColumns + `
FROM leasehold_job h
WHERE h.sequence_key IS NOT NULL
	AND h.state IN ('discarded', 'cancelled', 'stuck')
	AND ($1 = '' OR h.queue = $1)
	AND NOT EXISTS (SELECT 1 FROM leasehold_job p
		WHERE p.sequence_key = h.sequence_key AND p.id < h.id AND p.state <> 'completed')
	AND EXISTS (SELECT 1 FROM leasehold_job w
		WHERE w.sequence_key = h.sequence_key AND w.id > h.id
			AND w.state IN ('available', 'scheduled', 'retryable'))
ORDER BY h.sequence_key
LIMIT $2`

// keyStatsTopSQL lists the keys of unfinished jobs ($1 keeps one queue
// when not empty) by waiting jobs, then running ones, at most $2.
const keyStatsTopSQL = `
SELECT queue, flow_key,
	count(*) FILTER (WHERE state IN ('available', 'scheduled', 'retryable')) AS waiting,
	count(*) FILTER (WHERE state = 'running') AS running
FROM leasehold_job
WHERE flow_key IS NOT NULL
	AND state IN ('available', 'scheduled', 'retryable', 'running')
	AND ($1 = '' OR queue = $1)
GROUP BY queue, flow_key
ORDER BY waiting DESC, running DESC, queue, flow_key
LIMIT $2`

// keyStatsQueuesSQL sums up, per queue ($1 keeps one when not empty),
// the keys with waiting jobs: how many, their waiting jobs, the most of one
// key, and the keys with at most 1, 10, 100, 1000 and 10000 waiting jobs
// (driver.KeyWaitingBounds).
const keyStatsQueuesSQL = `
SELECT queue, count(*)::bigint, sum(n)::bigint, max(n)::bigint,
	sum(CASE WHEN n <= 1 THEN 1 ELSE 0 END)::bigint,
	sum(CASE WHEN n <= 10 THEN 1 ELSE 0 END)::bigint,
	sum(CASE WHEN n <= 100 THEN 1 ELSE 0 END)::bigint,
	sum(CASE WHEN n <= 1000 THEN 1 ELSE 0 END)::bigint,
	sum(CASE WHEN n <= 10000 THEN 1 ELSE 0 END)::bigint
FROM (SELECT queue, flow_key, count(*) AS n FROM leasehold_job
	WHERE flow_key IS NOT NULL
		AND state IN ('available', 'scheduled', 'retryable')
		AND ($1 = '' OR queue = $1)
	GROUP BY queue, flow_key) AS k
GROUP BY queue
ORDER BY queue`

func (e *executor) JobClaimKeyed(ctx context.Context, params *driver.JobClaimKeyedParams) ([]*leasetype.JobRow, error) {
	c := params.Claim
	if c == nil || c.Max < 1 {
		return []*leasetype.JobRow{}, nil
	}
	if params.KindKeyLimit > 0 && len(c.Kinds) != 1 {
		return nil, fmt.Errorf("claim keyed jobs: KindKeyLimit needs exactly one kind, got %d", len(c.Kinds))
	}
	kinds := make([]string, 0, len(c.KindLeaseTTL))
	ttls := make([]int64, 0, len(c.KindLeaseTTL))
	for kind, ttl := range c.KindLeaseTTL {
		kinds = append(kinds, kind)
		ttls = append(ttls, ttl.Milliseconds())
	}
	var (
		scope, name string
		start       pgtype.Timestamptz
		rate        int
	)
	if r := params.KeyRate; r != nil {
		scope, name, rate = r.Scope.Scope, r.Scope.Name, r.Limit
		start = pgtype.Timestamptz{Time: r.WindowStart, Valid: true}
	}
	rows, err := e.db.Query(ctx, jobClaimKeyedSQL, c.Queue, c.Max, c.Owner,
		kinds, ttls, c.DefaultLeaseTTL.Milliseconds(), nonNil(c.StuckKinds),
		nonNil(c.Kinds), nonNil(c.ExcludeKinds), params.KeyLimit, params.KindKeyLimit,
		scope, name, start, rate, params.Fair, nonNil(params.SequenceContinueKinds))
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", translateError(err))
	}
	jobs, err := scanJobs(rows, c.Max)
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", translateError(err))
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return driver.PositionOf(a).Compare(driver.PositionOf(b))
	})
	return jobs, nil
}

func (e *executor) KeyWindowAdd(ctx context.Context, params *driver.KeyWindowAddParams) error {
	if len(params.Starts) == 0 {
		return nil
	}
	keys := make([]string, 0, len(params.Starts))
	for k := range params.Starts {
		keys = append(keys, k)
	}
	// One order for every claimer: concurrent adds cannot deadlock.
	slices.Sort(keys)
	counts := make([]int64, len(keys))
	for i, k := range keys {
		counts[i] = params.Starts[k]
	}
	w := params.Window
	if _, err := e.db.Exec(ctx, keyWindowAddSQL, w.Scope.Scope, w.Scope.Name, w.WindowStart, w.WindowEnd, keys, counts); err != nil {
		return fmt.Errorf("record key rate windows: %w", translateError(err))
	}
	return nil
}

func (e *executor) KeyWindowPrune(ctx context.Context, params *driver.KeyWindowPruneParams) (int64, error) {
	tag, err := e.db.Exec(ctx, keyWindowPruneSQL, max(params.Limit, 1))
	if err != nil {
		return 0, fmt.Errorf("prune key rate windows: %w", translateError(err))
	}
	return tag.RowsAffected(), nil
}

func (e *executor) SequenceBlocked(ctx context.Context, params *driver.SequenceBlockedParams) ([]*driver.SequenceBlockedRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = defaultListLimit
	}
	rows, err := e.db.Query(ctx, sequenceBlockedSQL, params.Queue, limit)
	if err != nil {
		return nil, fmt.Errorf("list blocked sequences: %w", translateError(err))
	}
	defer rows.Close()
	out := []*driver.SequenceBlockedRow{}
	for rows.Next() {
		r := &driver.SequenceBlockedRow{}
		job, err := scanJob(rows, &r.Sequence, &r.Waiting)
		if err != nil {
			return nil, fmt.Errorf("scan blocked sequence: %w", err)
		}
		r.Job = job
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list blocked sequences: %w", translateError(err))
	}
	return out, nil
}

// KeyStats reports the top keys and the per-queue key summary.
func (e *executor) KeyStats(ctx context.Context, params *driver.KeyStatsParams) (*driver.KeyStatsResult, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = 20
	}
	res := &driver.KeyStatsResult{Top: []*driver.KeyStatsRow{}, Queues: []*driver.KeyQueueStatsRow{}}
	rows, err := e.db.Query(ctx, keyStatsTopSQL, params.Queue, limit)
	if err != nil {
		return nil, fmt.Errorf("key stats: %w", translateError(err))
	}
	for rows.Next() {
		r := &driver.KeyStatsRow{}
		if err := rows.Scan(&r.Queue, &r.Key, &r.Waiting, &r.Running); err != nil {
			rows.Close()
			return nil, fmt.Errorf("key stats: %w", err)
		}
		res.Top = append(res.Top, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("key stats: %w", translateError(err))
	}
	rows, err = e.db.Query(ctx, keyStatsQueuesSQL, params.Queue)
	if err != nil {
		return nil, fmt.Errorf("key stats: %w", translateError(err))
	}
	defer rows.Close()
	for rows.Next() {
		r := &driver.KeyQueueStatsRow{WaitingBuckets: make([]int64, len(driver.KeyWaitingBounds))}
		dest := []any{&r.Queue, &r.Keys, &r.Waiting, &r.MaxWaiting}
		for i := range r.WaitingBuckets {
			dest = append(dest, &r.WaitingBuckets[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("key stats: %w", err)
		}
		res.Queues = append(res.Queues, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("key stats: %w", translateError(err))
	}
	return res, nil
}
