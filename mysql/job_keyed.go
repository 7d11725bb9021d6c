package mysql

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobClaimKeyedRankSQLFormat picks the jobs a keyed claim may take, in a
// consistent read (fresh in the limited claim's READ COMMITTED transaction,
// after the limit rows are locked, so it sees every claim committed before).
//
// cand holds the claimable jobs of the queue (?1, ?2 for the paused test,
// then the kind filter, the %s, with its arguments), less the sequenced
// jobs that must wait: one whose sequence has a running job, or an earlier
// job that is unfinished, stuck, or (unless its kind is in the second %s)
// discarded or cancelled. Each gets its rank within its key (NULL keys form
// one group) in claim order. used holds, for each key in cand, its running
// jobs with an unexpired lease in the queue and of one kind in every queue
// (each counted only when its limit is set), and its starts in the rate
// window. A keyed job is picked while its rank fits under every limit;
// fairness orders by rank plus the key's running jobs (a key with jobs
// running ranks behind one with none, so small claims rotate too), then
// claim order.
const jobClaimKeyedRankSQLFormat = `WITH cand AS (
	SELECT j.id, j.flow_key, j.priority, j.scheduled_at,
		ROW_NUMBER() OVER (PARTITION BY j.flow_key ORDER BY j.priority, j.scheduled_at, j.id) AS key_rank
	FROM leasehold_job j
	WHERE j.claim_queue = ? AND j.scheduled_at <= ` + nowExpr + `
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL)%s
		AND (j.sequence_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM leasehold_job p
			WHERE p.sequence_key = j.sequence_key AND p.id <> j.id
				AND (p.state = 'running'
					OR p.id < j.id AND (p.state IN ('available', 'scheduled', 'retryable', 'stuck')
						OR p.state IN ('discarded', 'cancelled') AND %s))))
),
used AS (
	SELECT k.flow_key,
		IF(? > 0 OR ?, (SELECT COUNT(*) FROM leasehold_job r
			WHERE r.running_flow_key = k.flow_key AND r.running_queue = ?
				AND r.lease_until > ` + nowExpr + `), 0) AS queue_running,
		IF(? > 0, (SELECT COUNT(*) FROM leasehold_job r
			WHERE r.running_flow_key = k.flow_key AND r.running_kind = ?
				AND r.lease_until > ` + nowExpr + `), 0) AS kind_running,
		IF(? > 0, COALESCE((SELECT w.window_count FROM leasehold_key_window w
			WHERE w.scope = ? AND w.name = ? AND w.flow_key = k.flow_key
				AND w.window_start = CAST(? AS DATETIME(6))), 0), 0) AS window_used
	FROM (SELECT DISTINCT flow_key FROM cand WHERE flow_key IS NOT NULL) AS k
)
SELECT c.id
FROM cand c LEFT JOIN used u ON u.flow_key = c.flow_key
WHERE c.flow_key IS NULL OR (
	(? = 0 OR c.key_rank <= ? - u.queue_running)
	AND (? = 0 OR c.key_rank <= ? - u.kind_running)
	AND (? = 0 OR c.key_rank <= ? - u.window_used))
ORDER BY IF(?, c.key_rank + COALESCE(u.queue_running, 0), 0), c.priority, c.scheduled_at, c.id
LIMIT ?`

// jobClaimKeyedPickSQLFormat locks the ranked jobs (the %s: their IDs) that
// are still claimable, skipping rows others hold.
const jobClaimKeyedPickSQLFormat = `SELECT id, ` + nowExpr + ` FROM leasehold_job
WHERE id IN (%s) AND claim_queue IS NOT NULL
FOR UPDATE SKIP LOCKED`

// keyWindowAddSQLFormat adds starts to per-key rate windows; the %s is one
// "(scope, name, key, start, end, count)" row per key. A key's row is
// created, or restarted when it holds an older window (window_count is
// assigned first, while window_start still holds the old value), or added
// to.
const keyWindowAddSQLFormat = `INSERT INTO leasehold_key_window
	(scope, name, flow_key, window_start, window_end, window_count)
VALUES %s
ON DUPLICATE KEY UPDATE
	window_count = IF(window_start = VALUES(window_start), window_count + VALUES(window_count), VALUES(window_count)),
	window_start = VALUES(window_start),
	window_end = VALUES(window_end)`

// keyWindowPruneSQL deletes up to the argument's count of rate windows that
// ended.
const keyWindowPruneSQL = `DELETE FROM leasehold_key_window WHERE window_end < ` + nowExpr + ` LIMIT ?`

// sequenceBlockedSQL lists the sequences whose oldest job not completed is
// discarded, cancelled or stuck while a later job waits. Arguments: the
// queue twice ("" for all), the most rows.
const sequenceBlockedSQL = `SELECT h.sequence_key,
	(SELECT COUNT(*) FROM leasehold_job w
	 WHERE w.sequence_key = h.sequence_key AND w.id > h.id
		AND w.state IN ('available', 'scheduled', 'retryable', 'running')),
	` + jobColumns + `
FROM leasehold_job h
WHERE h.sequence_key IS NOT NULL
	AND h.state IN ('discarded', 'cancelled', 'stuck')
	AND (? = '' OR h.queue = ?)
	AND NOT EXISTS (SELECT 1 FROM leasehold_job p
		WHERE p.sequence_key = h.sequence_key AND p.id < h.id AND p.state <> 'completed')
	AND EXISTS (SELECT 1 FROM leasehold_job w
		WHERE w.sequence_key = h.sequence_key AND w.id > h.id
			AND w.state IN ('available', 'scheduled', 'retryable'))
ORDER BY h.sequence_key
LIMIT ?`

// keyStatsTopSQL lists the keys of unfinished jobs (? keeps one queue
// when not empty) by waiting jobs, then running ones, at most ?.
const keyStatsTopSQL = `
SELECT queue, flow_key,
	sum(CASE WHEN state IN ('available', 'scheduled', 'retryable') THEN 1 ELSE 0 END) AS waiting,
	sum(CASE WHEN state = 'running' THEN 1 ELSE 0 END) AS running
FROM leasehold_job
WHERE flow_key IS NOT NULL
	AND state IN ('available', 'scheduled', 'retryable', 'running')
	AND (? = '' OR queue = ?)
GROUP BY queue, flow_key
ORDER BY waiting DESC, running DESC, queue, flow_key
LIMIT ?`

// keyStatsQueuesSQL sums up, per queue (? keeps one when not empty),
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
		AND (? = '' OR queue = ?)
	GROUP BY queue, flow_key) AS k
GROUP BY queue
ORDER BY queue`

// JobClaimKeyed leases jobs with per-key flow control: a consistent read
// ranks and picks them, a locking read locks those still claimable, one
// UPDATE leases them (as JobClaim's) and a read returns them.
func (e *executor) JobClaimKeyed(ctx context.Context, params *driver.JobClaimKeyedParams) ([]*leasetype.JobRow, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	c := params.Claim
	if c == nil || c.Max < 1 {
		return []*leasetype.JobRow{}, nil
	}
	if params.KindKeyLimit > 0 && len(c.Kinds) != 1 {
		return nil, fmt.Errorf("claim keyed jobs: KindKeyLimit needs exactly one kind, got %d", len(c.Kinds))
	}
	filter, filterArgs := claimKindFilter(c.Kinds, c.ExcludeKinds)
	filter = strings.ReplaceAll(filter, " kind ", " j.kind ")
	continueExpr, continueArgs := "TRUE", []any{}
	if len(params.SequenceContinueKinds) > 0 {
		continueExpr = "j.kind NOT IN (" + placeholders(len(params.SequenceContinueKinds)) + ")"
		for _, k := range params.SequenceContinueKinds {
			continueArgs = append(continueArgs, k)
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
		scope, name, rate, start = r.Scope.Scope, r.Scope.Name, r.Limit, timeArg(&r.WindowStart)
	}
	rankArgs := append([]any{c.Queue, c.Queue}, filterArgs...)
	rankArgs = append(rankArgs, continueArgs...)
	rankArgs = append(rankArgs, params.KeyLimit, params.Fair, c.Queue, params.KindKeyLimit, kind, rate, scope, name, start,
		params.KeyLimit, params.KeyLimit, params.KindKeyLimit, params.KindKeyLimit, rate, rate, params.Fair, c.Max)
	rank := fmt.Sprintf(jobClaimKeyedRankSQLFormat, filter, continueExpr)

	ttlKinds := make([]string, 0, len(c.KindLeaseTTL))
	for k := range c.KindLeaseTTL {
		ttlKinds = append(ttlKinds, k)
	}
	slices.Sort(ttlKinds)
	ttlExpr, stuckExpr := "NULL", "FALSE"
	var ttlArgs, stuckArgs []any
	if len(ttlKinds) > 0 {
		var b strings.Builder
		b.WriteString("CASE kind")
		for _, k := range ttlKinds {
			b.WriteString(" WHEN ? THEN ?")
			ttlArgs = append(ttlArgs, k, c.KindLeaseTTL[k].Microseconds())
		}
		b.WriteString(" END")
		ttlExpr = b.String()
	}
	if len(c.StuckKinds) > 0 {
		stuckExpr = "kind IN (" + placeholders(len(c.StuckKinds)) + ")"
		for _, k := range c.StuckKinds {
			stuckArgs = append(stuckArgs, k)
		}
	}

	var jobs []*leasetype.JobRow
	err := e.writeInDriverTx(ctx, func(q querier) error {
		jobs = []*leasetype.JobRow{}
		ranked, err := sqlbackend.QueryAll(ctx, q, scanID, rank, rankArgs...)
		if err != nil || len(ranked) == 0 {
			return err
		}
		ids, now, err := pick(ctx, q, fmt.Sprintf(jobClaimKeyedPickSQLFormat, placeholders(len(ranked))), idArgs(ranked)...)
		if err != nil || len(ids) == 0 {
			return err
		}
		args := []any{c.Owner, now, now}
		args = append(args, ttlArgs...)
		args = append(args, c.DefaultLeaseTTL.Microseconds())
		args = append(args, stuckArgs...)
		args = append(args, idArgs(ids)...)
		update := fmt.Sprintf(jobClaimUpdateSQLFormat, ttlExpr, stuckExpr, placeholders(len(ids)))
		if _, err := q.ExecContext(ctx, update, args...); err != nil {
			return err
		}
		byID, err := jobsByID(ctx, q, ids)
		if err != nil {
			return fmt.Errorf("read claimed jobs: %w", err)
		}
		for _, j := range byID {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", translateError(err))
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority),
			a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// scanID reads a row of one BIGINT column.
func scanID(s sqlbackend.RowScanner) (int64, error) {
	var id int64
	err := s.Scan(&id)
	return id, err
}

// KeyWindowAdd records starts in per-key rate windows, in key order (one
// lock order for every claimer).
func (e *executor) KeyWindowAdd(ctx context.Context, params *driver.KeyWindowAddParams) error {
	if len(params.Starts) == 0 {
		return nil
	}
	keys := make([]string, 0, len(params.Starts))
	for k := range params.Starts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w := params.Window
	rows := make([]string, len(keys))
	args := make([]any, 0, 6*len(keys))
	for i, k := range keys {
		rows[i] = "(?, ?, ?, CAST(? AS DATETIME(6)), CAST(? AS DATETIME(6)), ?)"
		args = append(args, w.Scope.Scope, w.Scope.Name, k, timeArg(&w.WindowStart), timeArg(&w.WindowEnd), params.Starts[k])
	}
	err := e.writeInDriverTx(ctx, func(q querier) error {
		_, err := q.ExecContext(ctx, fmt.Sprintf(keyWindowAddSQLFormat, strings.Join(rows, ", ")), args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("record key rate windows: %w", translateError(err))
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
		return 0, fmt.Errorf("prune key rate windows: %w", translateError(err))
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
	out, err := sqlbackend.QueryAll(ctx, q, func(s sqlbackend.RowScanner) (*driver.SequenceBlockedRow, error) {
		r := &driver.SequenceBlockedRow{}
		job, err := scanJob(sqlbackend.LeadScanner{S: s, Lead: []any{&r.Sequence, &r.Waiting}})
		r.Job = job
		return r, err
	}, sequenceBlockedSQL, params.Queue, params.Queue, limit)
	if err != nil {
		return nil, fmt.Errorf("list blocked sequences: %w", translateError(err))
	}
	return out, nil
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
	if res.Top, err = sqlbackend.QueryAll(ctx, q, sqlbackend.ScanKeyStats, keyStatsTopSQL, params.Queue, params.Queue, limit); err != nil {
		return nil, fmt.Errorf("key stats: %w", translateError(err))
	}
	if res.Queues, err = sqlbackend.QueryAll(ctx, q, sqlbackend.ScanKeyQueueStats, keyStatsQueuesSQL, params.Queue, params.Queue); err != nil {
		return nil, fmt.Errorf("key stats: %w", translateError(err))
	}
	return res, nil
}
