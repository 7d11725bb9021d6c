package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobClaimableSQL is the filter of a keyed claim's jobs, alias j: the
// claimable jobs of queue ?1 as the plain claim filters them (scheduled by
// ?6, the database clock read once per claim; kinds of the JSON array ?3
// when not empty, none of ?4), less the sequenced jobs that must wait: one
// whose sequence has a running job, or an earlier job that is unfinished,
// stuck, or (unless its kind is in the JSON array ?5) discarded or
// cancelled. Its state list is the predicate of the claim indexes, which
// INDEXED BY requires.
const jobClaimableSQL = `j.state IN ('available', 'scheduled', 'retryable')
		AND j.queue = ?1 AND +j.scheduled_at <= ?6
		AND (json_array_length(?3) = 0 OR j.kind IN (SELECT value FROM json_each(?3)))
		AND j.kind NOT IN (SELECT value FROM json_each(?4))
		AND (j.sequence_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM leasehold_job p INDEXED BY leasehold_job_sequence_idx
			WHERE p.sequence_key = j.sequence_key AND p.id <> j.id
				AND (p.state = 'running'
					OR p.id < j.id AND (p.state IN ('available', 'scheduled', 'retryable', 'stuck')
						OR p.state IN ('discarded', 'cancelled')
							AND j.kind NOT IN (SELECT value FROM json_each(?5))))))`

// keySlotsSQL is the number of jobs the walked key of row w may start:
// what the queue key limit ?7, the kind key limit ?8 and the rate ?13
// (zero: none) leave it, at most ?2.
const keySlotsSQL = `min(?2,
		CASE WHEN ?7 > 0 THEN ?7 - w.queue_running ELSE ?2 END,
		CASE WHEN ?8 > 0 THEN ?8 - w.kind_running ELSE ?2 END,
		CASE WHEN ?13 > 0 THEN ?13 - w.window_used ELSE ?2 END)`

// keyFoundSQL is 1 when the walked key of row w counts towards the claim's
// keys: it has a claimable job and a free slot.
const keyFoundSQL = `(w.first_id IS NOT NULL AND ` + keySlotsSQL + ` > 0)`

// jobClaimKeyedSQL picks the jobs of a claim with per-key flow control.
// It runs in the write transaction (SQLite's one writer serialises it
// with every other claim, so nothing changes between it and the update
// that leases its picks) and costs what the keys it visits and the jobs
// it reads for them cost, not the backlog: every read is one probe of
// leasehold_job_key_claim_idx (queue, flow_key, priority, scheduled_at,
// id) over the claimable jobs with a key, of the group without a key in
// leasehold_job_claim_idx (schema version 11), or of a key's entries in
// another index.
//
// walk visits the keys of queue ?1's claimable jobs (none when the queue
// is paused) in key order, one probe of the index per key (a skip scan;
// SQLite has no LATERAL, so the probe finds a job of the next key by ID,
// and the step joins that row for its key): it starts after the
// key_cursor of limit row (?15, ?16), the last key the previous such claim
// visited, goes on from the first key after the last one, and stops when
// it has found ?2 keys with a free slot and a job that passes
// jobClaimableSQL, when it is back at the cursor, or after ?2 + 256 keys.
// For each key it counts the running jobs, expired leases included (a job
// holds its key's slot until its lease is reclaimed: the package
// documentation, Per-key flow control), in the queue and, when ?8 > 0, of kind ?9 in every queue, the starts in
// the rate window (scope ?10, ?11, window start ?12), and finds its first
// claimable job in claim order. A row's found is the count of keys found
// before it, so the walk can stop on the row that completes the claim.
//
// pool holds, for each visited key with slots (keySlotsSQL), its first
// jobs in claim order, as many as its slots, each with its rank within
// the key; and the first jobs without a key, one group counted with no
// running jobs. SQLite allows no correlated LIMIT, so a key's jobs after
// its first (the walk's) are read one probe at a time, each the key's next
// claimable job after the one before (a row value range of the index); the
// group without a key, read from the claim index's group 0, starts from a
// row of rank 0 that sorts before every job (priority 0). With ?14 the
// picks go round-robin across these keys: by rank plus the key's running
// jobs (a key with jobs running ranks behind one with none), then claim
// order; so a key needs no more jobs read than the ranks below the ?2-th
// smallest running count of the keys found, plus one (bound). Without ?14,
// claim order.
//
// It returns the last key walked (NULL when it walked none), the next
// claim's cursor, on every row, and the picked IDs (one row of NULL when
// it picked none).
const jobClaimKeyedSQL = `
WITH RECURSIVE start(cursor_key) AS (
	SELECT coalesce((SELECT l.key_cursor FROM leasehold_limit l WHERE l.scope = ?15 AND l.name = ?16), '')
	WHERE NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?1 AND q.paused_at IS NOT NULL)
),
walk(step, flow_key, wrapped, found, queue_running, kind_running, window_used, first_id) AS (
	SELECT 0, cursor_key, 0, 0, 0, 0, 0, NULL FROM start
	UNION ALL
	SELECT w.step + 1, n.flow_key, w.wrapped OR n.flow_key <= w.flow_key, w.found + ` + keyFoundSQL + `,
		CASE WHEN ?7 > 0 OR ?14 THEN (SELECT count(*) FROM leasehold_job r INDEXED BY leasehold_job_flow_key_idx
			WHERE r.flow_key = n.flow_key AND r.state = 'running' AND r.queue = ?1) ELSE 0 END,
		CASE WHEN ?8 > 0 THEN (SELECT count(*) FROM leasehold_job r INDEXED BY leasehold_job_flow_key_idx
			WHERE r.flow_key = n.flow_key AND r.state = 'running' AND r.kind = ?9) ELSE 0 END,
		CASE WHEN ?13 > 0 THEN coalesce((SELECT kw.window_count FROM leasehold_key_window kw
			WHERE kw.scope = ?10 AND kw.name = ?11 AND kw.flow_key = n.flow_key
				AND kw.window_start = ?12), 0) ELSE 0 END,
		(SELECT j.id FROM leasehold_job j INDEXED BY leasehold_job_key_claim_idx
			WHERE j.flow_key = n.flow_key AND ` + jobClaimableSQL + `
			ORDER BY j.priority, j.scheduled_at, j.id LIMIT 1)
	FROM walk w
	JOIN leasehold_job n ON n.id = coalesce(
		(SELECT j.id FROM leasehold_job j INDEXED BY leasehold_job_key_claim_idx
			WHERE j.state IN ('available', 'scheduled', 'retryable') AND j.queue = ?1 AND j.flow_key > w.flow_key
			ORDER BY j.flow_key LIMIT 1),
		CASE WHEN NOT w.wrapped THEN (SELECT j.id FROM leasehold_job j INDEXED BY leasehold_job_key_claim_idx
			WHERE j.state IN ('available', 'scheduled', 'retryable') AND j.queue = ?1 AND j.flow_key > ''
			ORDER BY j.flow_key LIMIT 1) END)
	WHERE w.found + ` + keyFoundSQL + ` < ?2 AND w.step < ?2 + 256
		AND NOT ((w.wrapped OR n.flow_key <= w.flow_key) AND n.flow_key > (SELECT cursor_key FROM start))
),
visited AS MATERIALIZED (
	SELECT w.step, w.flow_key, w.queue_running, w.first_id, ` + keySlotsSQL + ` AS slots
	FROM walk w WHERE w.step > 0
),
bound(top_round) AS (
	SELECT coalesce(CASE WHEN ?14 THEN (SELECT v.queue_running + 1 FROM visited v
		WHERE v.first_id IS NOT NULL AND v.slots > 0
		ORDER BY v.queue_running LIMIT 1 OFFSET ?2 - 1) END, 2147483647)
),
pool(flow_key, id, priority, scheduled_at, key_rank, cap, queue_running) AS (
	SELECT v.flow_key, j.id, j.priority, j.scheduled_at, 1, min(v.slots, b.top_round - v.queue_running), v.queue_running
	FROM visited v CROSS JOIN bound b CROSS JOIN leasehold_job j
	WHERE j.id = v.first_id AND v.slots > 0 AND b.top_round > v.queue_running
	UNION ALL
	SELECT NULL, 0, 0, 0, 0, min(?2, b.top_round), 0 FROM start CROSS JOIN bound b
	UNION ALL
	SELECT pl.flow_key, j.id, j.priority, j.scheduled_at, pl.key_rank + 1, pl.cap, pl.queue_running
	FROM pool pl CROSS JOIN leasehold_job j
	WHERE pl.key_rank < pl.cap AND j.id = CASE WHEN pl.flow_key IS NULL THEN (
		SELECT j.id FROM leasehold_job j INDEXED BY leasehold_job_claim_idx
		WHERE (j.flow_key IS NOT NULL) = 0 AND (j.priority, j.scheduled_at, j.id) > (pl.priority, pl.scheduled_at, pl.id)
			AND ` + jobClaimableSQL + `
		ORDER BY j.priority, j.scheduled_at, j.id LIMIT 1)
	ELSE (
		SELECT j.id FROM leasehold_job j INDEXED BY leasehold_job_key_claim_idx
		WHERE j.flow_key = pl.flow_key AND (j.priority, j.scheduled_at, j.id) > (pl.priority, pl.scheduled_at, pl.id)
			AND ` + jobClaimableSQL + `
		ORDER BY j.priority, j.scheduled_at, j.id LIMIT 1) END
),
picked AS (
	SELECT id FROM pool WHERE key_rank > 0
	ORDER BY CASE WHEN ?14 THEN key_rank + queue_running ELSE 0 END, priority, scheduled_at, id
	LIMIT ?2
)
SELECT (SELECT v.flow_key FROM visited v ORDER BY v.step DESC LIMIT 1), pk.id
FROM (SELECT 1) AS one LEFT JOIN picked pk ON true`

// jobClaimSequencedSQL picks the jobs of a keyed claim without key limits,
// rate or fairness (only sequences to honour): the plain claim's merge of
// queue ?1's two groups in the claim index (claimSQL), with the sequence
// filter, at most ?2 jobs, none when the queue is paused.
// Its parameters are jobClaimKeyedSQL's ?1 to ?6; it returns no cursor
// (NULL) and the picked IDs.
const jobClaimSequencedSQL = `
SELECT NULL, id FROM (
	SELECT j.id, j.priority, j.scheduled_at FROM leasehold_job j INDEXED BY leasehold_job_claim_idx
	WHERE (j.flow_key IS NOT NULL) = 0 AND ` + jobClaimableSQL + `
	UNION ALL
	SELECT j.id, j.priority, j.scheduled_at FROM leasehold_job j INDEXED BY leasehold_job_claim_idx
	WHERE (j.flow_key IS NOT NULL) = 1 AND ` + jobClaimableSQL + `
	ORDER BY priority, scheduled_at, id
	LIMIT ?2)
WHERE NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?1 AND q.paused_at IS NOT NULL)`

// jobClaimPickedSQL leases the picked jobs, the JSON array of IDs ?6, that
// are still claimable, at ?5 (the clock jobClaimKeyedSQL used): ?1 owner,
// ?2 JSON object of lease TTLs in ms by kind, ?3 default TTL in ms, ?4
// JSON array of the kinds whose expiry policy is stuck.
const jobClaimPickedSQL = `UPDATE leasehold_job
SET state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?1,
	leased_at = ?5,
	lease_until = ?5 + 1000 * coalesce(
		lease_ttl_ms,
		(SELECT t.value FROM json_each(?2) AS t WHERE t.key = leasehold_job.kind),
		?3),
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = CASE
		WHEN leasehold_job.kind IN (SELECT s.value FROM json_each(?4) AS s) THEN 'stuck'
		ELSE 'retry' END
WHERE id IN (SELECT value FROM json_each(?6))
	AND +state IN ('available', 'scheduled', 'retryable')
RETURNING ` + jobColumns

// keyCursorSetSQL moves the key cursor of limit row (?1, ?2) to ?3, the
// last key a keyed claim walked. A claim that locked no limit row (a
// driver caller's) finds none and keeps no cursor.
const keyCursorSetSQL = `UPDATE leasehold_limit SET key_cursor = ?3 WHERE scope = ?1 AND name = ?2`

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

// JobClaimKeyed leases jobs with per-key flow control, in the write
// transaction: jobClaimKeyedSQL (or jobClaimSequencedSQL) picks them and
// returns the walk's last key, keyCursorSetSQL keeps that key for the next
// claim, jobClaimPickedSQL leases the picks.
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
	cursor := keyCursorRow(c)
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
	keyed := params.Fair || params.KeyLimit > 0 || params.KindKeyLimit > 0 || rate > 0
	var jobs []*leasetype.JobRow
	err = e.write(ctx, func(q querier) error {
		jobs = []*leasetype.JobRow{}
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		args := []any{c.Queue, c.Max, lists[1], lists[2], lists[3], now}
		query := jobClaimSequencedSQL
		if keyed {
			query = jobClaimKeyedSQL
			args = append(args, params.KeyLimit, params.KindKeyLimit, kind, scope, name, start, rate, params.Fair,
				cursor.Scope, cursor.Name)
		}
		var (
			last sql.NullString
			ids  []int64
		)
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id sql.NullInt64
			if err := rows.Scan(&last, &id); err != nil {
				return err
			}
			if id.Valid {
				ids = append(ids, id.Int64)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if last.Valid {
			if _, err := q.ExecContext(ctx, keyCursorSetSQL, cursor.Scope, cursor.Name, last.String); err != nil {
				return fmt.Errorf("move key cursor: %w", err)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		rows, err = q.QueryContext(ctx, jobClaimPickedSQL, c.Owner, string(kindTTLJSON), defaultTTL, lists[0], now, string(idsJSON))
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

// keyCursorRow names the limit row that keeps a keyed claim's key cursor:
// the kind's for a claim of one kind, which a client runs for a kind with
// a limit of its own, in the same transaction as the claim of the queue's
// other kinds; the queue's for that claim and any other. So each claim
// statement goes round the keys on its own: with one cursor, the one
// that runs first could walk, claim after claim, the keys whose jobs only
// the second one takes.
func keyCursorRow(c *driver.JobClaimParams) driver.LimitKey {
	if len(c.Kinds) == 1 {
		return driver.LimitKey{Scope: driver.LimitScopeKind, Name: c.Kinds[0]}
	}
	return driver.LimitKey{Scope: driver.LimitScopeQueue, Name: c.Queue}
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
