package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// walk lists the keys of queue $1 (none when the queue is paused) from
// leasehold_queue_key in key order, a range scan: those after the
// key_cursor of the limit row keyCursorRowSQL names (the last key the
// previous such claim visited), then from the first key up to the cursor,
// at most $2 + 256 keys. visit takes them in that order (the CTE scan
// returns the walk's rows as they were written, and no sort above the
// nested loop stops it early) and keeps the first $2 that have a free slot
// and a job that passes jobClaimableSQL, with its first such job in claim
// order (priority, scheduled time, ID). For each key it counts the running
// jobs in the queue and, when $11 > 0, of the one kind $8 in every queue
// (a running job holds its key's slot until its lease is reclaimed, even
// past its expiry time, when a renewal in flight could still make it live
// again: the package documentation, Per-key flow control), and the starts
// in the rate window ($12, $13, window start $14); its slots are what the
// queue key limit $10, the kind key limit $11 and the rate $15 (zero: none)
// leave, at most $2. A key whose slots are taken costs its counts only: its
// jobs are not read. The counts spell state = 'running' as a range so that
// they read the key's entries of leasehold_job_flow_key_idx: the range does
// not imply the predicate of
// leasehold_job_running_idx, which a plan made while few jobs ran would
// pick and then scan the queue's every running job for each key.
//
// pool holds, for each visited key, its first jobs in claim order from
// leasehold_job_key_claim_idx, as many as its slots, each with its rank
// within the key (the first is visit's, the rest are read after it only
// for a key with more than one slot); and the first jobs
// without a key, one group counted with no running jobs. With $16 the
// picks go round-robin across these keys: by rank plus the key's running
// jobs (a key with jobs running ranks behind one with none), then claim
// order; so a key needs no more jobs read than the ranks below the $2-th
// smallest running count of the keys found, plus one. Without $16, claim
// order.
//
// The picked rows are locked by address (a Tid scan, whatever the number
// of rows: by ID the planner joins a large claim to a scan of the whole
// table) with SKIP LOCKED: a row an operator's action holds, or that
// changed since the statement's snapshot (its address then holds an older
// version), is left for the next claim. They are leased as the plain claim
// leases; the key_cursor moves to the last key visited: the $2-th key kept,
// or the walk's last key when fewer were found.
const jobClaimKeyedSQL = `
WITH start AS MATERIALIZED (
	SELECT coalesce((SELECT l.key_cursor FROM leasehold_limit l
		WHERE (l.scope, l.name) = ` + keyCursorRowSQL + `), '') AS cursor_key
	WHERE NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
),
walk AS MATERIALIZED (
	SELECT row_number() OVER (ORDER BY k.lap, k.flow_key) AS step, k.flow_key
	FROM start s
	CROSS JOIN LATERAL (
		(SELECT 1 AS lap, q.flow_key FROM leasehold_queue_key q
		 WHERE q.queue = $1 AND q.flow_key > s.cursor_key
		 ORDER BY q.flow_key LIMIT $2 + 256)
		UNION ALL
		(SELECT 2, q.flow_key FROM leasehold_queue_key q
		 WHERE q.queue = $1 AND q.flow_key <= s.cursor_key
		 ORDER BY q.flow_key LIMIT $2 + 256)
	) AS k
	ORDER BY k.lap, k.flow_key
	LIMIT $2 + 256
),
visit AS MATERIALIZED (
	SELECT w.step, w.flow_key, u.queue_running, u.slots, f.job_ctid, f.id, f.priority, f.scheduled_at
	FROM walk w
	CROSS JOIN LATERAL (
		SELECT c.queue_running, least($2::bigint,
			CASE WHEN $10::int > 0 THEN $10::int - c.queue_running ELSE $2 END,
			CASE WHEN $11::int > 0 THEN $11::int - c.kind_running ELSE $2 END,
			CASE WHEN $15::int > 0 THEN $15::int - c.window_used ELSE $2 END) AS slots
		FROM (SELECT
			CASE WHEN $10::int > 0 OR $16::boolean THEN (SELECT count(*) FROM leasehold_job r
				WHERE r.flow_key = w.flow_key AND r.state >= 'running' AND r.state <= 'running'
					AND r.queue = $1) ELSE 0 END AS queue_running,
			CASE WHEN $11::int > 0 THEN (SELECT count(*) FROM leasehold_job r
				WHERE r.flow_key = w.flow_key AND r.state >= 'running' AND r.state <= 'running'
					AND r.kind = ($8::text[])[1]) ELSE 0 END AS kind_running,
			CASE WHEN $15::int > 0 THEN coalesce((SELECT kw.window_count FROM leasehold_key_window kw
				WHERE kw.scope = $12 AND kw.name = $13 AND kw.flow_key = w.flow_key
					AND kw.window_start = $14::timestamptz), 0) ELSE 0 END AS window_used
			OFFSET 0) AS c
	) AS u
	CROSS JOIN LATERAL (
		SELECT j.ctid AS job_ctid, j.id, j.priority, j.scheduled_at
		FROM leasehold_job j
		WHERE u.slots > 0 AND j.flow_key = w.flow_key AND ` + jobClaimableSQL + `
		ORDER BY j.priority, j.scheduled_at, j.id
		LIMIT 1
	) AS f
	LIMIT $2
),
bound AS MATERIALIZED (
	SELECT coalesce(CASE WHEN $16::boolean THEN (SELECT v.queue_running + 1 FROM visit v
		ORDER BY v.queue_running OFFSET $2 - 1 LIMIT 1) END, 2147483647) AS top_round
),
pool AS (
	SELECT v.job_ctid, v.id, v.priority, v.scheduled_at, 1 + v.queue_running AS round
	FROM visit v, bound b
	WHERE b.top_round > v.queue_running
	UNION ALL
	SELECT p.job_ctid, p.id, p.priority, p.scheduled_at, p.key_rank + v.queue_running AS round
	FROM visit v, bound b
	CROSS JOIN LATERAL (
		SELECT j.ctid AS job_ctid, j.id, j.priority, j.scheduled_at,
			1 + row_number() OVER (ORDER BY j.priority, j.scheduled_at, j.id) AS key_rank
		FROM leasehold_job j
		WHERE j.flow_key = v.flow_key AND ` + jobClaimableSQL + `
			AND (j.priority, j.scheduled_at, j.id) > (v.priority, v.scheduled_at, v.id)
		ORDER BY j.priority, j.scheduled_at, j.id
		LIMIT least(v.slots, b.top_round - v.queue_running) - 1
	) AS p
	WHERE least(v.slots, b.top_round - v.queue_running) > 1
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
	FROM (SELECT CASE WHEN (SELECT count(*) FROM visit) >= $2
			THEN (SELECT v.flow_key FROM visit v ORDER BY v.step DESC LIMIT 1)
			ELSE (SELECT w.flow_key FROM walk w ORDER BY w.step DESC LIMIT 1) END AS flow_key) AS last
	WHERE (scope, name) = ` + keyCursorRowSQL + ` AND last.flow_key IS NOT NULL
),
locked AS MATERIALIZED (
	SELECT ctid AS picked_ctid FROM leasehold_job
	WHERE ctid = ANY(ARRAY(SELECT job_ctid FROM picked))
	FOR UPDATE SKIP LOCKED
)
` + jobLeaseSetSQL + `WHERE ctid = ANY(ARRAY(SELECT picked_ctid FROM locked))
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
`+jobLeaseSetSQL+`WHERE ctid = ANY(ARRAY(SELECT picked_ctid FROM locked))
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

// queueKeyStaleSQL checks up to $3 rows of leasehold_queue_key after
// ($1, $2) in (queue, key) order: a plain read, without locks, that marks
// stale the keys no job has unless completed, candidates that
// queueKeyPruneSQL checks again. The two EXISTS read the key's entries of
// leasehold_job_flow_key_idx below and above 'completed': a key's completed
// jobs, which retention may keep by the million, are not read.
const queueKeyStaleSQL = `
SELECT k.queue, k.flow_key,
	NOT EXISTS (SELECT 1 FROM leasehold_job j
		WHERE j.flow_key = k.flow_key AND j.state < 'completed' AND j.queue = k.queue)
	AND NOT EXISTS (SELECT 1 FROM leasehold_job j
		WHERE j.flow_key = k.flow_key AND j.state > 'completed' AND j.queue = k.queue)
FROM (SELECT queue, flow_key FROM leasehold_queue_key
	WHERE (queue, flow_key) > ($1, $2)
	ORDER BY queue, flow_key
	LIMIT $3) AS k
ORDER BY k.queue, k.flow_key`

// queueKeyLockSQL makes the key deletes of queueKeyPruneSQL wait for, and
// hold off, every transaction that inserts a job with a key: each of them
// takes ROW EXCLUSIVE on the table in its trigger (migration 10), which
// SHARE conflicts with. Under the lock, the delete's snapshot (a new one:
// READ COMMITTED) sees every job inserted with a key it deletes, and no
// such job can be inserted until it commits; an insert that waited then
// adds the key again.
const queueKeyLockSQL = `LOCK TABLE leasehold_queue_key IN SHARE MODE`

// queueKeyPruneSQL deletes the candidate keys ($1 queues, $2 keys) that
// still have no job unless completed.
const queueKeyPruneSQL = `
DELETE FROM leasehold_queue_key k
USING unnest($1::text[], $2::text[]) AS c(queue, flow_key)
WHERE k.queue = c.queue AND k.flow_key = c.flow_key
	AND NOT EXISTS (SELECT 1 FROM leasehold_job j
		WHERE j.flow_key = k.flow_key AND j.state < 'completed' AND j.queue = k.queue)
	AND NOT EXISTS (SELECT 1 FROM leasehold_job j
		WHERE j.flow_key = k.flow_key AND j.state > 'completed' AND j.queue = k.queue)`

// queueKeyLockTimeout bounds the wait of a key prune for the lock: the
// keyed inserts that start meanwhile queue behind it. A prune that cannot
// get it in time deletes nothing and is tried again next round.
const queueKeyLockTimeout = "100ms"

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
	query, args, err := keyedClaimQuery(params)
	if err != nil || query == "" {
		return []*leasetype.JobRow{}, err
	}
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", translateError(err))
	}
	return scanKeyedClaim(rows, params.Claim.Max)
}

// keyedClaimQuery returns the statement of a keyed claim and its
// arguments: jobClaimKeyedSQL, or jobClaimSequencedSQL when only sequences
// are to be honoured; an empty query for a claim of nothing.
func keyedClaimQuery(params *driver.JobClaimKeyedParams) (string, []any, error) {
	c := params.Claim
	if c == nil || c.Max < 1 {
		return "", nil, nil
	}
	if params.KindKeyLimit > 0 && len(c.Kinds) != 1 {
		return "", nil, fmt.Errorf("claim keyed jobs: KindKeyLimit needs exactly one kind, got %d", len(c.Kinds))
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
	if params.Fair || params.KeyLimit > 0 || params.KindKeyLimit > 0 || rate > 0 {
		args = append(args, params.KeyLimit, params.KindKeyLimit,
			scope, name, start, rate, params.Fair, nonNil(params.SequenceContinueKinds))
		return jobClaimKeyedSQL, args, nil
	}
	// No key limit, rate or fairness: only sequences to honour.
	return jobClaimSequencedSQL, append(args, nonNil(params.SequenceContinueKinds)), nil
}

// scanKeyedClaim reads a keyed claim's rows, in claim order.
func scanKeyedClaim(rows pgx.Rows, limit int) ([]*leasetype.JobRow, error) {
	jobs, err := scanJobs(rows, limit)
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", translateError(err))
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return driver.PositionOf(a).Compare(driver.PositionOf(b))
	})
	return jobs, nil
}

var _ driver.LockedKeyedClaimer = (*executor)(nil)

// JobClaimKeyedLocked sends a whole limited claim of one keyed statement as
// one batch (driver.LockedKeyedClaimer): LimitLock's statements that create
// and lock the limit rows, then the keyed claim, in one implicit
// transaction that commits when the batch ends. Each statement reads a
// snapshot of its own (READ COMMITTED), so the claim's counts see every
// claim committed before the lock was had, as in a transaction of
// separate round trips.
func (e *executor) JobClaimKeyedLocked(ctx context.Context, locks *driver.LimitLockParams, params *driver.JobClaimKeyedParams) ([]*leasetype.JobRow, error) {
	if _, inTx := e.db.(pgx.Tx); inTx {
		return nil, errors.New("claim keyed jobs: JobClaimKeyedLocked runs its own transaction, not inside one")
	}
	query, args, err := keyedClaimQuery(params)
	if err != nil || query == "" {
		return []*leasetype.JobRow{}, err
	}
	scopes := make([]string, len(locks.Keys))
	names := make([]string, len(locks.Keys))
	for i, k := range locks.Keys {
		scopes[i], names[i] = k.Scope, k.Name
	}
	b := &pgx.Batch{}
	b.Queue(limitCreateSQL, scopes, names)
	b.Queue(limitLockSQL, scopes, names)
	b.Queue(query, args...)
	br := e.db.SendBatch(ctx, b)
	jobs, err := readLockedKeyedClaim(br, len(locks.Keys), params.Claim.Max)
	// Close reports the commit: nothing read before it is known to hold.
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("claim keyed jobs: %w", translateError(closeErr))
	}
	if err != nil {
		return nil, err
	}
	return jobs, nil
}

// readLockedKeyedClaim reads the results of JobClaimKeyedLocked's batch.
func readLockedKeyedClaim(br pgx.BatchResults, keys, limit int) ([]*leasetype.JobRow, error) {
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("create limit rows: %w", translateError(err))
	}
	locked, err := scanLimitRows(br)
	if err != nil {
		return nil, fmt.Errorf("lock limit rows: %w", translateError(err))
	}
	if len(locked) != keys {
		return nil, fmt.Errorf("lock limit rows: locked %d of %d rows", len(locked), keys)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("claim keyed jobs: %w", translateError(err))
	}
	return scanKeyedClaim(rows, limit)
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

// QueueKeyPrune checks up to params.Scan keys of leasehold_queue_key after
// params.After and deletes those that no job has unless completed
// (driver.QueueKeyPruner): it reads the candidates without locks, then
// checks and deletes them under queueKeyLockSQL, held for that one
// statement. It deletes nothing, without an error, when the lock is not had
// within queueKeyLockTimeout; the step's keys are checked again next time
// round.
func (e *executor) QueueKeyPrune(ctx context.Context, params *driver.QueueKeyPruneParams) (*driver.QueueKeyPruneResult, error) {
	scan := params.Scan
	if scan <= 0 {
		scan = 1000
	}
	rows, err := e.db.Query(ctx, queueKeyStaleSQL, params.After.Queue, params.After.Key, scan)
	if err != nil {
		return nil, fmt.Errorf("prune queue keys: %w", translateError(err))
	}
	var (
		queues, keys []string
		last         driver.QueueKey
		checked      int
	)
	for rows.Next() {
		var stale bool
		if err := rows.Scan(&last.Queue, &last.Key, &stale); err != nil {
			rows.Close()
			return nil, fmt.Errorf("prune queue keys: %w", err)
		}
		checked++
		if stale {
			queues, keys = append(queues, last.Queue), append(keys, last.Key)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("prune queue keys: %w", translateError(err))
	}
	res := &driver.QueueKeyPruneResult{}
	if checked == scan {
		res.Next = &last
	}
	if len(keys) == 0 {
		return res, nil
	}
	err = pgx.BeginFunc(ctx, e.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, migrationLockTimeoutSQL, queueKeyLockTimeout); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, queueKeyLockSQL); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, queueKeyPruneSQL, queues, keys)
		res.Deleted = tag.RowsAffected()
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		res.Deleted = 0
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("prune queue keys: %w", translateError(err))
	}
	return res, nil
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
