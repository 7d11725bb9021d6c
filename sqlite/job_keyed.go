package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobClaimKeyedSQL is the claim with per-key flow control, in one
// statement; SQLite's single writer serialises it with every other claim.
// ?1 to ?8 are the plain claim's (owner, lease TTLs by kind, default TTL,
// stuck kinds, queue, most jobs, kinds, excluded kinds).
//
// cand holds the claimable jobs the plain claim would consider, less the
// sequenced jobs that must wait: one whose sequence has a running job, or
// an earlier job that is unfinished, stuck, or (unless its kind is in the
// JSON array ?17) discarded or cancelled. Each gets its rank within its key
// (NULL keys form one group) in claim order. used holds, for each key in
// cand, its running jobs with an unexpired lease in the queue and, when
// ?10 > 0, of kind ?11 in every queue, and its starts in the rate window
// (scope ?12, ?13, window start ?14). A keyed job is picked while its rank
// fits under every limit: queue key limit ?9, kind key limit ?10, rate ?15
// (zero: none). ?16 orders the picks round-robin across keys: by rank plus
// the key's running jobs (a key with jobs running ranks behind one with
// none, so small claims rotate too), then claim order.
const jobClaimKeyedSQL = `
WITH cand AS MATERIALIZED (
	SELECT j.id, j.flow_key, j.priority, j.scheduled_at,
		row_number() OVER (PARTITION BY j.flow_key ORDER BY j.priority, j.scheduled_at, j.id) AS key_rank
	FROM leasehold_job j
	WHERE j.state IN ('available', 'scheduled', 'retryable')
		AND j.queue = ?5 AND j.scheduled_at <= ` + nowExpr + `
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?5 AND q.paused_at IS NOT NULL)
		AND (json_array_length(?7) = 0 OR j.kind IN (SELECT value FROM json_each(?7)))
		AND j.kind NOT IN (SELECT value FROM json_each(?8))
		AND (j.sequence_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM leasehold_job p
			WHERE p.sequence_key = j.sequence_key AND p.id <> j.id
				AND (p.state = 'running'
					OR p.id < j.id AND (p.state IN ('available', 'scheduled', 'retryable', 'stuck')
						OR p.state IN ('discarded', 'cancelled')
							AND j.kind NOT IN (SELECT value FROM json_each(?17))))))
),
used AS MATERIALIZED (
	SELECT k.flow_key,
		CASE WHEN ?9 > 0 OR ?16 THEN (SELECT count(*) FROM leasehold_job r
			WHERE r.flow_key = k.flow_key AND r.state = 'running' AND r.queue = ?5
				AND r.lease_until > ` + nowExpr + `) ELSE 0 END AS queue_running,
		CASE WHEN ?10 > 0 THEN (SELECT count(*) FROM leasehold_job r
			WHERE r.flow_key = k.flow_key AND r.state = 'running' AND r.kind = ?11
				AND r.lease_until > ` + nowExpr + `) ELSE 0 END AS kind_running,
		CASE WHEN ?15 > 0 THEN coalesce((SELECT w.window_count FROM leasehold_key_window w
			WHERE w.scope = ?12 AND w.name = ?13 AND w.flow_key = k.flow_key
				AND w.window_start = ?14), 0) ELSE 0 END AS window_used
	FROM (SELECT DISTINCT flow_key FROM cand WHERE flow_key IS NOT NULL) AS k
),
picked AS (
	SELECT c.id
	FROM cand c LEFT JOIN used u ON u.flow_key = c.flow_key
	WHERE c.flow_key IS NULL OR (
		(?9 = 0 OR c.key_rank <= ?9 - u.queue_running)
		AND (?10 = 0 OR c.key_rank <= ?10 - u.kind_running)
		AND (?15 = 0 OR c.key_rank <= ?15 - u.window_used))
	ORDER BY CASE WHEN ?16 THEN c.key_rank + coalesce(u.queue_running, 0) ELSE 0 END, c.priority, c.scheduled_at, c.id
	LIMIT ?6
)
UPDATE leasehold_job
SET state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?1,
	leased_at = ` + nowExpr + `,
	lease_until = ` + nowExpr + ` + 1000 * coalesce(
		lease_ttl_ms,
		(SELECT t.value FROM json_each(?2) AS t WHERE t.key = leasehold_job.kind),
		?3),
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = CASE
		WHEN leasehold_job.kind IN (SELECT s.value FROM json_each(?4) AS s) THEN 'stuck'
		ELSE 'retry' END
WHERE id IN (SELECT id FROM picked)
RETURNING ` + jobColumns

// keyWindowAddSQL adds starts (?5, a JSON object of counts by key) to the
// rate windows of scope (?1, ?2) for the window from ?3 to ?4: a key's row
// is created, or restarted when it holds an older window, or added to.
const keyWindowAddSQL = `
INSERT INTO leasehold_key_window (scope, name, flow_key, window_start, window_end, window_count)
SELECT ?1, ?2, s.key, ?3, ?4, s.value FROM json_each(?5) AS s WHERE true
ON CONFLICT (scope, name, flow_key) DO UPDATE SET
	window_count = CASE WHEN window_start = excluded.window_start
		THEN window_count + excluded.window_count ELSE excluded.window_count END,
	window_start = excluded.window_start,
	window_end = excluded.window_end`

// keyWindowPruneSQL deletes up to ?1 rate windows that ended.
const keyWindowPruneSQL = `
DELETE FROM leasehold_key_window
WHERE rowid IN (SELECT rowid FROM leasehold_key_window WHERE window_end < ` + nowExpr + ` LIMIT ?1)`

// sequenceBlockedSQL lists the sequences whose oldest job not completed is
// discarded, cancelled or stuck while a later job waits; ?1 keeps one queue
// when not empty, ?2 is the most rows.
const sequenceBlockedSQL = `
SELECT h.sequence_key,
	(SELECT count(*) FROM leasehold_job w
	 WHERE w.sequence_key = h.sequence_key AND w.id > h.id
		AND w.state IN ('available', 'scheduled', 'retryable', 'running')),
	` + jobColumns + `
FROM leasehold_job h
WHERE h.sequence_key IS NOT NULL
	AND h.state IN ('discarded', 'cancelled', 'stuck')
	AND (?1 = '' OR h.queue = ?1)
	AND NOT EXISTS (SELECT 1 FROM leasehold_job p
		WHERE p.sequence_key = h.sequence_key AND p.id < h.id AND p.state <> 'completed')
	AND EXISTS (SELECT 1 FROM leasehold_job w
		WHERE w.sequence_key = h.sequence_key AND w.id > h.id
			AND w.state IN ('available', 'scheduled', 'retryable'))
ORDER BY h.sequence_key
LIMIT ?2`

// keyStatsTopSQL lists the keys of unfinished jobs (?1 keeps one queue
// when not empty) by waiting jobs, then running ones, at most ?2.
const keyStatsTopSQL = `
SELECT queue, flow_key,
	sum(CASE WHEN state IN ('available', 'scheduled', 'retryable') THEN 1 ELSE 0 END) AS waiting,
	sum(CASE WHEN state = 'running' THEN 1 ELSE 0 END) AS running
FROM leasehold_job
WHERE flow_key IS NOT NULL
	AND state IN ('available', 'scheduled', 'retryable', 'running')
	AND (?1 = '' OR queue = ?1)
GROUP BY queue, flow_key
ORDER BY waiting DESC, running DESC, queue, flow_key
LIMIT ?2`

// keyStatsQueuesSQL sums up, per queue (?1 keeps one when not empty),
// the keys with waiting jobs: how many, their waiting jobs, the most of one
// key, and the keys with at most 1, 10, 100, 1000 and 10000 waiting jobs
// (driver.KeyWaitingBounds).
const keyStatsQueuesSQL = `
SELECT queue, count(*), sum(n), max(n),
	sum(CASE WHEN n <= 1 THEN 1 ELSE 0 END),
	sum(CASE WHEN n <= 10 THEN 1 ELSE 0 END),
	sum(CASE WHEN n <= 100 THEN 1 ELSE 0 END),
	sum(CASE WHEN n <= 1000 THEN 1 ELSE 0 END),
	sum(CASE WHEN n <= 10000 THEN 1 ELSE 0 END)
FROM (SELECT queue, flow_key, count(*) AS n FROM leasehold_job
	WHERE flow_key IS NOT NULL
		AND state IN ('available', 'scheduled', 'retryable')
		AND (?1 = '' OR queue = ?1)
	GROUP BY queue, flow_key) AS k
GROUP BY queue
ORDER BY queue`

// JobClaimKeyed leases jobs with per-key flow control in one statement.
func (e *executor) JobClaimKeyed(ctx context.Context, params *driver.JobClaimKeyedParams) ([]*leasetype.JobRow, error) {
	c := params.Claim
	if c == nil || c.Max < 1 {
		return []*leasetype.JobRow{}, nil
	}
	if params.KindKeyLimit > 0 && len(c.Kinds) != 1 {
		return nil, fmt.Errorf("claim keyed jobs: KindKeyLimit needs exactly one kind, got %d", len(c.Kinds))
	}
	kindTTL := make(map[string]int64, len(c.KindLeaseTTL))
	for kind, ttl := range c.KindLeaseTTL {
		if ms, ok := millis(ttl).(int64); ok {
			kindTTL[kind] = ms
		}
	}
	kindTTLJSON, err := json.Marshal(kindTTL)
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: encode lease TTLs: %w", err)
	}
	defaultTTL, _ := millis(c.DefaultLeaseTTL).(int64)
	var lists [4]string
	for i, l := range [][]string{c.StuckKinds, c.Kinds, c.ExcludeKinds, params.SequenceContinueKinds} {
		if lists[i], err = jsonStrings(l); err != nil {
			return nil, fmt.Errorf("claim keyed jobs: encode kinds: %w", err)
		}
	}
	kind := ""
	if len(c.Kinds) == 1 {
		kind = c.Kinds[0]
	}
	var (
		scope, name string
		start       any
		rate        int
	)
	if r := params.KeyRate; r != nil {
		scope, name, rate, start = r.Scope.Scope, r.Scope.Name, r.Limit, r.WindowStart.UnixMicro()
	}
	args := []any{c.Owner, string(kindTTLJSON), defaultTTL, lists[0], c.Queue, c.Max, lists[1], lists[2],
		params.KeyLimit, params.KindKeyLimit, kind, scope, name, start, rate, params.Fair, lists[3]}
	var jobs []*leasetype.JobRow
	err = e.write(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, jobClaimKeyedSQL, args...)
		if err != nil {
			return err
		}
		jobs, err = sqlbackend.ScanAll(rows, scanJob)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority),
			a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// KeyWindowAdd records starts in per-key rate windows.
func (e *executor) KeyWindowAdd(ctx context.Context, params *driver.KeyWindowAddParams) error {
	if len(params.Starts) == 0 {
		return nil
	}
	starts, err := json.Marshal(params.Starts)
	if err != nil {
		return fmt.Errorf("record key rate windows: %w", err)
	}
	w := params.Window
	err = e.write(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, keyWindowAddSQL, w.Scope.Scope, w.Scope.Name,
			w.WindowStart.UnixMicro(), w.WindowEnd.UnixMicro(), string(starts))
		return err
	})
	if err != nil {
		return fmt.Errorf("record key rate windows: %w", err)
	}
	return nil
}

// KeyWindowPrune deletes rate windows that ended.
func (e *executor) KeyWindowPrune(ctx context.Context, params *driver.KeyWindowPruneParams) (int64, error) {
	var n int64
	err := e.write(ctx, func(q querier) error {
		res, err := q.ExecContext(ctx, keyWindowPruneSQL, max(params.Limit, 1))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune key rate windows: %w", err)
	}
	return n, nil
}

// SequenceBlocked lists the blocked sequences.
func (e *executor) SequenceBlocked(ctx context.Context, params *driver.SequenceBlockedParams) ([]*driver.SequenceBlockedRow, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	limit := params.Limit
	if limit <= 0 {
		limit = 100
	}
	out, err := sqlbackend.QueryAll(ctx, q, scanBlockedSequence, sequenceBlockedSQL, params.Queue, limit)
	if err != nil {
		return nil, fmt.Errorf("list blocked sequences: %w", err)
	}
	return out, nil
}

// scanBlockedSequence reads a row of sequenceBlockedSQL.
func scanBlockedSequence(s sqlbackend.RowScanner) (*driver.SequenceBlockedRow, error) {
	r := &driver.SequenceBlockedRow{}
	job, err := scanJob(sqlbackend.LeadScanner{S: s, Lead: []any{&r.Sequence, &r.Waiting}})
	if err != nil {
		return nil, err
	}
	r.Job = job
	return r, nil
}

// KeyStats reports the top keys and the per-queue key summary.
func (e *executor) KeyStats(ctx context.Context, params *driver.KeyStatsParams) (*driver.KeyStatsResult, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	limit := params.Limit
	if limit <= 0 {
		limit = 20
	}
	res := &driver.KeyStatsResult{}
	if res.Top, err = sqlbackend.QueryAll(ctx, q, sqlbackend.ScanKeyStats, keyStatsTopSQL, params.Queue, limit); err != nil {
		return nil, fmt.Errorf("key stats: %w", err)
	}
	if res.Queues, err = sqlbackend.QueryAll(ctx, q, sqlbackend.ScanKeyQueueStats, keyStatsQueuesSQL, params.Queue); err != nil {
		return nil, fmt.Errorf("key stats: %w", err)
	}
	return res, nil
}
