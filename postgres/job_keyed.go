package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobClaimKeyedSQL is the claim with per-key flow control. It runs in the
// limited claim's transaction, after the limit rows are locked (the queue's
// among them), so no other keyed claim of the queue (or of a key-limited
// kind) runs between its counts and its update. Its cost grows with the
// keys it visits and the jobs it reads for them, not with the backlog.
//
// walk visits the keys of queue $1's claimable jobs (none when the queue
// is paused) in key order, one probe of leasehold_job_key_claim_idx per key
// (a skip scan): it starts after the key_cursor of the limit row
// keyCursorRowSQL names, the last key the previous such claim visited,
// goes on from the first key after the last one, and stops when it has found $2 keys that have a free slot and a job
// that passes jobClaimableSQL, when it is back at the cursor, or after
// $2 + 256 keys. For each key it counts the running jobs with an
// unexpired lease in the queue and, when $11 > 0, of the one kind $8 in
// every queue, and the starts in the rate window ($12, $13, window start
// $14); its slots are what the queue key limit $10, the kind key limit $11
// and the rate $15 (zero: none) leave, at most $2. The counts spell
// state = 'running' as a range so that they read the key's entries of
// leasehold_job_flow_key_idx: the range does not imply the predicate of
// leasehold_job_running_idx, which a plan made while few jobs ran would
// pick and then scan the queue's every running job for each key.
//
// pool holds, for each visited key with slots, its first jobs in claim
// order (priority, scheduled time, ID), as many as its slots, each with its
// rank within the key; and the first jobs without a key, one group counted
// with no running jobs. With $16 the picks go round-robin across these
// keys: by rank plus the key's running jobs (a key with jobs running ranks
// behind one with none), then claim order; so a key needs no more jobs
// read than the ranks below the $2-th smallest running count of the keys
// found, plus one. Without $16, claim order.
//
// The picked rows are locked by address (a Tid scan, whatever the number
// of rows: by ID the planner joins a large claim to a scan of the whole
// table) with SKIP LOCKED: a row an operator's action holds, or that
// changed since the statement's snapshot (its address then holds an older
// version), is left for the next claim. They are leased as the plain claim
// leases; the key_cursor moves to the last key walked.
const jobClaimKeyedSQL = `
WITH RECURSIVE clock AS MATERIALIZED (SELECT clock_timestamp() AS run_now),
start AS MATERIALIZED (
	SELECT coalesce((SELECT l.key_cursor FROM leasehold_limit l
		WHERE (l.scope, l.name) = ` + keyCursorRowSQL + `), '') AS cursor_key
	WHERE NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
),
walk (step, flow_key, wrapped, found, queue_running, slots) AS (
	SELECT 0, s.cursor_key, false, 0, 0::bigint, 0::bigint FROM start s
	UNION ALL
	SELECT w.step + 1, n.flow_key, n.wrapped,
		w.found + CASE WHEN h.has_job THEN 1 ELSE 0 END,
		u.queue_running, CASE WHEN h.has_job THEN u.slots ELSE 0 END
	FROM walk w
	CROSS JOIN LATERAL (
		(SELECT j.flow_key, w.wrapped AS wrapped FROM leasehold_job j
		 WHERE j.queue = $1 AND j.state IN ('available', 'scheduled', 'retryable')
			AND j.flow_key > w.flow_key
		 ORDER BY j.flow_key LIMIT 1)
		UNION ALL
		(SELECT j.flow_key, true FROM leasehold_job j
		 WHERE NOT w.wrapped AND j.queue = $1 AND j.state IN ('available', 'scheduled', 'retryable')
			AND j.flow_key > ''
		 ORDER BY j.flow_key LIMIT 1)
		LIMIT 1
	) AS n
	CROSS JOIN LATERAL (
		SELECT c.queue_running, least($2::bigint,
			CASE WHEN $10::int > 0 THEN $10::int - c.queue_running ELSE $2 END,
			CASE WHEN $11::int > 0 THEN $11::int - c.kind_running ELSE $2 END,
			CASE WHEN $15::int > 0 THEN $15::int - c.window_used ELSE $2 END) AS slots
		FROM (SELECT
			CASE WHEN $10::int > 0 OR $16::boolean THEN (SELECT count(*) FROM leasehold_job r, clock
				WHERE r.flow_key = n.flow_key AND r.state >= 'running' AND r.state <= 'running'
					AND r.queue = $1 AND r.lease_until > clock.run_now) ELSE 0 END AS queue_running,
			CASE WHEN $11::int > 0 THEN (SELECT count(*) FROM leasehold_job r, clock
				WHERE r.flow_key = n.flow_key AND r.state >= 'running' AND r.state <= 'running'
					AND r.kind = ($8::text[])[1] AND r.lease_until > clock.run_now) ELSE 0 END AS kind_running,
			CASE WHEN $15::int > 0 THEN coalesce((SELECT w.window_count FROM leasehold_key_window w
				WHERE w.scope = $12 AND w.name = $13 AND w.flow_key = n.flow_key
					AND w.window_start = $14::timestamptz), 0) ELSE 0 END AS window_used
			OFFSET 0) AS c
	) AS u
	CROSS JOIN LATERAL (
		SELECT u.slots > 0 AND EXISTS (SELECT 1 FROM leasehold_job j
			WHERE j.flow_key = n.flow_key AND ` + jobClaimableSQL + `) AS has_job
		OFFSET 0
	) AS h
	WHERE w.found < $2 AND w.step < $2 + 256 AND n.flow_key IS NOT NULL
		AND NOT (n.wrapped AND n.flow_key > (SELECT cursor_key FROM start))
),
bound AS MATERIALIZED (
	SELECT coalesce(CASE WHEN $16::boolean THEN (SELECT w.queue_running + 1 FROM walk w WHERE w.slots > 0
		ORDER BY w.queue_running OFFSET $2 - 1 LIMIT 1) END, 2147483647) AS top_round
),
pool AS (
	SELECT p.job_ctid, p.id, p.priority, p.scheduled_at, p.key_rank + w.queue_running AS round
	FROM walk w, bound b
	CROSS JOIN LATERAL (
		SELECT j.ctid AS job_ctid, j.id, j.priority, j.scheduled_at,
			row_number() OVER (ORDER BY j.priority, j.scheduled_at, j.id) AS key_rank
		FROM leasehold_job j
		WHERE j.flow_key = w.flow_key AND ` + jobClaimableSQL + `
		ORDER BY j.priority, j.scheduled_at, j.id
		LIMIT greatest(0, least(w.slots, b.top_round - w.queue_running))
	) AS p
	WHERE w.step > 0 AND w.slots > 0
	UNION ALL
	SELECT p.job_ctid, p.id, p.priority, p.scheduled_at, p.key_rank
	FROM start, bound b
	CROSS JOIN LATERAL (
		SELECT j.ctid AS job_ctid, j.id, j.priority, j.scheduled_at,
			row_number() OVER (ORDER BY j.priority, j.scheduled_at, j.id) AS key_rank
		FROM leasehold_job j
		WHERE j.flow_key IS NULL AND ` + jobClaimableSQL + `
		ORDER BY j.priority, j.scheduled_at, j.id
		LIMIT least($2, b.top_round)
	) AS p
),
picked AS (
	SELECT job_ctid FROM pool
	ORDER BY CASE WHEN $16::boolean THEN round ELSE 0 END, priority, scheduled_at, id
	LIMIT $2
),
moved AS (
	UPDATE leasehold_limit SET key_cursor = last.flow_key
	FROM (SELECT w.flow_key FROM walk w WHERE w.step > 0 ORDER BY w.step DESC LIMIT 1) AS last
	WHERE (scope, name) = ` + keyCursorRowSQL + `
),
locked AS MATERIALIZED (
	SELECT ctid AS picked_ctid FROM leasehold_job
	WHERE ctid = ANY(ARRAY(SELECT job_ctid FROM picked))
	FOR UPDATE SKIP LOCKED
)
` + jobLeaseSetSQL + `FROM locked
WHERE leasehold_job.ctid = locked.picked_ctid
RETURNING ` + jobColumns

// keyCursorRowSQL names the limit row that keeps a keyed claim's
// key_cursor: the kind's for a claim of one kind ($8), which a client runs
// for a kind with a limit of its own, in the same transaction as the claim
// of the queue's other kinds; the queue's for that claim and any other. So
// each statement goes round the keys on its own: with one cursor, the
// statement that runs first could walk, claim after claim, the keys
// whose jobs only the second one takes.
const keyCursorRowSQL = `(CASE WHEN cardinality($8::text[]) = 1 THEN 'kind' ELSE 'queue' END,
		CASE WHEN cardinality($8::text[]) = 1 THEN ($8::text[])[1] ELSE $1 END)`

// jobClaimableSQL is the filter of a keyed claim's jobs, alias j: the
// claimable jobs of queue $1 as the plain claim filters them (kinds $8,
// not $9), less the sequenced jobs that must wait: one whose sequence has
// a running job, or an earlier job that is unfinished, stuck, or (unless
// its kind is in $17) discarded or cancelled.
const jobClaimableSQL = `j.state IN ('available', 'scheduled', 'retryable')
		AND j.queue = $1
		AND j.scheduled_at <= now()
		AND (cardinality($8::text[]) = 0 OR j.kind = ANY($8::text[]))
		AND j.kind <> ALL($9::text[])
		AND (j.sequence_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM leasehold_job p
			WHERE p.sequence_key = j.sequence_key AND p.id <> j.id
				AND (p.state = 'running'
					OR p.id < j.id AND (p.state IN ('available', 'scheduled', 'retryable', 'stuck')
						OR p.state IN ('discarded', 'cancelled') AND j.kind <> ALL($17::text[])))))`

// jobClaimSequencedSQL is the keyed claim without key limits, rate or
// fairness (only sequences to honour): the plain claim's ordered scan of
// queue $1 (not paused) with the sequence filter, at most $2 jobs. Its
// parameters are jobClaimKeyedSQL's $1 to $9, and $10 for $17; it locks
// the picked rows by address as jobClaimKeyedSQL does.
var jobClaimSequencedSQL = strings.ReplaceAll(`
WITH picked AS (
	SELECT j.ctid AS job_ctid FROM leasehold_job j
	WHERE `+jobClaimableSQL+`
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
	ORDER BY j.priority, j.scheduled_at, j.id
	LIMIT $2
),
locked AS MATERIALIZED (
	SELECT ctid AS picked_ctid FROM leasehold_job
	WHERE ctid = ANY(ARRAY(SELECT job_ctid FROM picked))
	FOR UPDATE SKIP LOCKED
)
`+jobLeaseSetSQL+`FROM locked
WHERE leasehold_job.ctid = locked.picked_ctid
RETURNING `+jobColumns, "$17", "$10")

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
	args := []any{c.Queue, c.Max, c.Owner,
		kinds, ttls, c.DefaultLeaseTTL.Milliseconds(), nonNil(c.StuckKinds),
		nonNil(c.Kinds), nonNil(c.ExcludeKinds)}
	query := jobClaimSequencedSQL
	if params.Fair || params.KeyLimit > 0 || params.KindKeyLimit > 0 || rate > 0 {
		query = jobClaimKeyedSQL
		args = append(args, params.KeyLimit, params.KindKeyLimit,
			scope, name, start, rate, params.Fair, nonNil(params.SequenceContinueKinds))
	} else {
		// No key limit, rate or fairness: only sequences to honour.
		args = append(args, nonNil(params.SequenceContinueKinds))
	}
	rows, err := e.db.Query(ctx, query, args...)
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
