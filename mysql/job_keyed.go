package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// A keyed claim walks the keys of the queue's claimable jobs in key order
// on leasehold_job_key_claim_idx (claim_queue, flow_key, priority,
// scheduled_at, id), a batch of keys per statement, from the key_cursor of
// a limit row (keyCursorRow), and stops when it has found Max keys with a
// free slot and a claimable job, when it is back at the cursor, or after
// Max + 256 keys; so its cost grows with the keys it visits and the jobs
// it reads for them, not with the backlog. Its statements run in the
// limited claim's READ COMMITTED transaction, after the limit rows are
// locked, so each sees every claim committed before, and no other keyed
// claim of the queue (or of a key-limited kind) runs between its counts and
// its update.
//
// It is a loop of short indexed statements, not one recursive statement:
// MariaDB 10.11 has no LATERAL, and the one-row probes a recursive CTE
// would make per key are dependent subqueries, which get no range access
// from the outer row: one that looks for the first key after the outer
// row's reads the queue's index entries from its first (ref on
// claim_queue, then a filter on flow_key; two such probes read 101,020
// entries of a 200,000-job queue). The loop's statements seek with their
// arguments: a range on the index from the last key walked. A batch costs
// a round trip and the copy of its index entries into a derived table, a
// key's probes far less, so a batch asks for about as many keys as the
// claim still needs.
//
// FORCE INDEX pins each read to the index named: with the statistics of
// a table filled since they were taken (an empty one), the optimizer
// looked a key's first job up on leasehold_job_claim_idx, reading the
// queue in claim order up to it, and counted a key's running jobs on the
// queue's running index; a batch took a second.

// keyWalkSQLFormat is one batch of the walk. Its arguments, in order: the
// queue key limit and fairness, the queue (the running count, counted
// when either is set); the kind key limit and the kind (the kind's running
// count in every queue, when its limit is set); the rate, the window's
// scope, name and start (its starts in the rate window, when a rate is
// set); the queue and keyedClaimableSQLFormat's (the second %s) arguments
// (the key's first claimable job in claim order); then the batch: the
// queue, the key after which it starts, with the first %s the cursor at
// which the second pass (after wrapping round) ends, the most index entries
// to read (so a key with a large backlog costs one batch, not its backlog:
// the next starts after it), and the most keys. For each key it returns
// the entries read, the counts and the first job's ID. The dependent
// subqueries look the key up by equality: ref access on the running index,
// the window's primary key, the key index.
const keyWalkSQLFormat = `SELECT k.flow_key, k.n,
	IF(? > 0 OR ?, (SELECT COUNT(*) FROM leasehold_job r FORCE INDEX (leasehold_job_running_flow_key_idx)
		WHERE r.running_flow_key = k.flow_key AND r.running_queue = ?), 0),
	IF(? > 0, (SELECT COUNT(*) FROM leasehold_job r FORCE INDEX (leasehold_job_running_flow_key_idx)
		WHERE r.running_flow_key = k.flow_key AND r.running_kind = ?), 0),
	IF(? > 0, COALESCE((SELECT w.window_count FROM leasehold_key_window w
		WHERE w.scope = ? AND w.name = ? AND w.flow_key = k.flow_key
			AND w.window_start = CAST(? AS DATETIME(6))), 0), 0),
	(SELECT j.id FROM leasehold_job j FORCE INDEX (leasehold_job_key_claim_idx)
		WHERE j.claim_queue = ? AND j.flow_key = k.flow_key%[2]s
		ORDER BY j.priority, j.scheduled_at, j.id LIMIT 1)
FROM (SELECT e.flow_key, COUNT(*) AS n
	FROM (SELECT flow_key FROM leasehold_job FORCE INDEX (leasehold_job_key_claim_idx)
		WHERE claim_queue = ? AND flow_key > ?%[1]s
		ORDER BY flow_key LIMIT ?) AS e
	GROUP BY e.flow_key ORDER BY e.flow_key LIMIT ?) AS k
ORDER BY k.flow_key`

// keyWalkUpToSQL bounds the second pass of the walk at the cursor.
const keyWalkUpToSQL = ` AND flow_key <= ?`

// keyedClaimableSQLFormat filters a keyed claim's jobs, alias j, already
// of the queue and claimable (claim_queue): scheduled by now, the kind
// filter (the first %s, claimKindFilter's), less the sequenced jobs that
// must wait: one whose sequence has a running job, or an earlier job that
// is unfinished, stuck, or (unless its kind continues, the second %s)
// discarded or cancelled.
const keyedClaimableSQLFormat = ` AND j.scheduled_at <= ` + nowExpr + `%s
		AND (j.sequence_key IS NULL OR NOT EXISTS (
			SELECT 1 FROM leasehold_job p FORCE INDEX (leasehold_job_sequence_idx)
			WHERE p.sequence_key = j.sequence_key AND p.id <> j.id
				AND (p.state = 'running'
					OR p.id < j.id AND (p.state IN ('available', 'scheduled', 'retryable', 'stuck')
						OR p.state IN ('discarded', 'cancelled') AND %s))))`

// keyCursorReadSQL reads the walk's start: the key cursor of a limit row
// (scope, name; "" when there is none), and whether the queue is paused.
const keyCursorReadSQL = `SELECT
	COALESCE((SELECT key_cursor FROM leasehold_limit WHERE scope = ? AND name = ?), ''),
	EXISTS (SELECT 1 FROM leasehold_queue WHERE name = ? AND paused_at IS NOT NULL)`

// keyCursorSetSQL moves the key cursor of limit row (scope, name) to the
// last key a keyed claim walked. A claim that locked no limit row (a
// driver caller's) finds none and keeps no cursor.
const keyCursorSetSQL = `UPDATE leasehold_limit SET key_cursor = ? WHERE scope = ? AND name = ?`

// keyPoolFirstSQLFormat reads the picks' order columns of the first jobs
// the walk found, by ID (the %s).
const keyPoolFirstSQLFormat = `(SELECT j.id, j.flow_key, j.priority, j.scheduled_at FROM leasehold_job j
	WHERE j.id IN (%s))`

// keyPoolKeySQLFormat reads the first jobs in claim order, at most the
// last argument, of one key of the queue (the first argument): the first
// %s is "= ?" and the key, or "IS NULL" for the jobs without a key. They
// are filtered by keyedClaimableSQLFormat (the second %s, its arguments
// next): a range of the key index.
const keyPoolKeySQLFormat = `(SELECT j.id, j.flow_key, j.priority, j.scheduled_at
	FROM leasehold_job j FORCE INDEX (leasehold_job_key_claim_idx)
	WHERE j.claim_queue = ? AND j.flow_key %s%s
	ORDER BY j.priority, j.scheduled_at, j.id LIMIT ?)`

// jobClaimSequencedSQLFormat picks the jobs of a keyed claim without key
// limits, rate or fairness (only sequences to honour): the plain claim's
// ordered scan of the queue (the first argument; the second, the queue
// again, for the paused test) with the sequence filter (%s,
// keyedClaimableSQLFormat, its arguments next), at most the last argument.
const jobClaimSequencedSQLFormat = `SELECT j.id FROM leasehold_job j FORCE INDEX (leasehold_job_claim_idx)
WHERE j.claim_queue = ?
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL)%s
ORDER BY j.priority, j.scheduled_at, j.id
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

// JobClaimKeyed leases jobs with per-key flow control: the key walk
// (keyWalk) or, without key limits, rate or fairness, the sequenced claim
// picks them, a locking read locks those still claimable, one UPDATE
// leases them (as JobClaim's) and a read returns them. The walk's cursor
// is written before the lease: in the driver's transaction the caller rolls
// back after any error, elsewhere a savepoint undoes both.
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
	w := newKeyWalk(params)

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
		var (
			ranked []int64
			err    error
		)
		if w.keyed() {
			ranked, err = w.pick(ctx, q)
		} else {
			args := append([]any{c.Queue, c.Queue}, w.claimableArgs...)
			ranked, err = sqlbackend.QueryAll(ctx, q, scanID,
				fmt.Sprintf(jobClaimSequencedSQLFormat, w.claimable), append(args, c.Max)...)
		}
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

// keyWalk is one keyed claim's walk of the keys and its picks (see the
// comment above keyWalkSQLFormat).
type keyWalk struct {
	p      *driver.JobClaimKeyedParams
	c      *driver.JobClaimParams
	cursor driver.LimitKey
	// claimable is keyedClaimableSQLFormat filled in, with its arguments.
	claimable     string
	claimableArgs []any
	// kind is the claim's one kind ("" for several), the rate window's
	// scope, start and limit (zero: none).
	kind, scope, name string
	start             any
	rate              int
}

// keyVisit is a key the walk visited: its running jobs in the queue and
// of the kind, its starts in the rate window, its first claimable job.
type keyVisit struct {
	key                             string
	queueRunning, kindRunning, used int64
	first                           sql.NullInt64
}

// keyPick is a job a keyed claim may pick, with its rank within its key
// (jobs without a key are one group, counted with no running jobs).
type keyPick struct {
	id           int64
	key          sql.NullString
	priority     int
	scheduledAt  dbTime
	rank, queued int64
}

func newKeyWalk(p *driver.JobClaimKeyedParams) *keyWalk {
	c := p.Claim
	w := &keyWalk{p: p, c: c, cursor: keyCursorRow(c)}
	filter, filterArgs := claimKindFilter(c.Kinds, c.ExcludeKinds)
	filter = strings.ReplaceAll(filter, " kind ", " j.kind ")
	continueExpr := "TRUE"
	w.claimableArgs = filterArgs
	if len(p.SequenceContinueKinds) > 0 {
		continueExpr = "j.kind NOT IN (" + placeholders(len(p.SequenceContinueKinds)) + ")"
		for _, k := range p.SequenceContinueKinds {
			w.claimableArgs = append(w.claimableArgs, k)
		}
	}
	w.claimable = fmt.Sprintf(keyedClaimableSQLFormat, filter, continueExpr)
	if len(c.Kinds) == 1 {
		w.kind = c.Kinds[0]
	}
	if r := p.KeyRate; r != nil {
		w.scope, w.name, w.rate, w.start = r.Scope.Scope, r.Scope.Name, r.Limit, timeArg(&r.WindowStart)
	}
	return w
}

// keyed reports whether the claim needs the walk: without key limits,
// rate or fairness it has only sequences to honour.
func (w *keyWalk) keyed() bool {
	return w.p.Fair || w.p.KeyLimit > 0 || w.p.KindKeyLimit > 0 || w.rate > 0
}

// slots is how many jobs key v may start: what the queue key limit, the
// kind key limit and the rate leave it, at most Max.
func (w *keyWalk) slots(v *keyVisit) int64 {
	s := int64(w.c.Max)
	for _, l := range []struct{ limit, used int64 }{
		{int64(w.p.KeyLimit), v.queueRunning}, {int64(w.p.KindKeyLimit), v.kindRunning}, {int64(w.rate), v.used},
	} {
		if l.limit > 0 {
			s = min(s, l.limit-l.used)
		}
	}
	return s
}

// found reports whether key v counts towards the claim's keys: it has a
// claimable job and a free slot.
func (w *keyWalk) found(v *keyVisit) bool { return v.first.Valid && w.slots(v) > 0 }

// pick walks the keys, moves the cursor to the last one, and returns the
// IDs of the jobs to claim in pick order: with fairness round-robin across
// the visited keys (by rank within the key plus the key's running jobs, a
// key with jobs running behind one with none), then claim order; without,
// claim order.
func (w *keyWalk) pick(ctx context.Context, q querier) ([]int64, error) {
	var (
		cursor string
		paused bool
	)
	if err := q.QueryRowContext(ctx, keyCursorReadSQL, w.cursor.Scope, w.cursor.Name, w.c.Queue).Scan(&cursor, &paused); err != nil {
		return nil, fmt.Errorf("read key cursor: %w", err)
	}
	if paused {
		return nil, nil
	}
	visits, err := w.walk(ctx, q, cursor)
	if err != nil {
		return nil, err
	}
	if len(visits) > 0 {
		if _, err := q.ExecContext(ctx, keyCursorSetSQL, visits[len(visits)-1].key, w.cursor.Scope, w.cursor.Name); err != nil {
			return nil, fmt.Errorf("move key cursor: %w", err)
		}
	}

	// A key needs no more jobs read than the ranks below the Max-th
	// smallest running count of the keys found, plus one: Max jobs rank
	// at or before that round.
	maxInt := int64(w.c.Max)
	top := int64(1) << 62
	var running []int64
	for i := range visits {
		if w.found(&visits[i]) {
			running = append(running, visits[i].queueRunning)
		}
	}
	if w.p.Fair && len(running) >= w.c.Max {
		slices.Sort(running)
		top = running[w.c.Max-1] + 1
	}
	var (
		parts    []string
		args     []any
		firstIDs []int64
		queued   = map[string]int64{}
		caps     = map[string]int64{}
	)
	for i := range visits {
		v := &visits[i]
		capacity := min(w.slots(v), top-v.queueRunning)
		if !v.first.Valid || capacity < 1 {
			continue
		}
		queued[v.key], caps[v.key] = v.queueRunning, capacity
		if capacity == 1 {
			firstIDs = append(firstIDs, v.first.Int64)
			continue
		}
		parts = append(parts, fmt.Sprintf(keyPoolKeySQLFormat, "= ?", w.claimable))
		args = append(append(append(args, w.c.Queue, v.key), w.claimableArgs...), capacity)
	}
	unkeyedCap := min(maxInt, top)
	parts = append(parts, fmt.Sprintf(keyPoolKeySQLFormat, "IS NULL", w.claimable))
	args = append(append(append(args, w.c.Queue), w.claimableArgs...), unkeyedCap)
	if len(firstIDs) > 0 {
		parts = append([]string{fmt.Sprintf(keyPoolFirstSQLFormat, placeholders(len(firstIDs)))}, parts...)
		args = append(idArgs(firstIDs), args...)
	}
	pool, err := sqlbackend.QueryAll(ctx, q, func(s sqlbackend.RowScanner) (keyPick, error) {
		var p keyPick
		err := s.Scan(&p.id, &p.key, &p.priority, &p.scheduledAt)
		return p, err
	}, strings.Join(parts, "\nUNION ALL\n"), args...)
	if err != nil {
		return nil, fmt.Errorf("read the visited keys' jobs: %w", err)
	}

	claimOrder := func(a, b keyPick) int {
		return cmp.Or(cmp.Compare(a.priority, b.priority),
			a.scheduledAt.Time.Compare(b.scheduledAt.Time), cmp.Compare(a.id, b.id))
	}
	slices.SortFunc(pool, claimOrder)
	ranks := map[sql.NullString]int64{}
	kept := pool[:0]
	for _, p := range pool {
		ranks[p.key]++
		p.rank = ranks[p.key]
		if p.key.Valid {
			p.queued = queued[p.key.String]
			if p.rank > caps[p.key.String] {
				continue
			}
		}
		kept = append(kept, p)
	}
	if w.p.Fair {
		slices.SortStableFunc(kept, func(a, b keyPick) int { return cmp.Compare(a.rank+a.queued, b.rank+b.queued) })
	}
	ids := make([]int64, 0, min(len(kept), w.c.Max))
	for _, p := range kept[:min(len(kept), w.c.Max)] {
		ids = append(ids, p.id)
	}
	return ids, nil
}

// walk visits the keys after cursor, then from the first key up to the
// cursor, a batch per statement (keyWalkSQLFormat), until it has found
// Max keys, visited Max + 256, or is back at the cursor.
func (w *keyWalk) walk(ctx context.Context, q querier, cursor string) ([]keyVisit, error) {
	maxKeys, budget := w.c.Max, w.c.Max+256
	var (
		visits  []keyVisit
		found   int
		after   = cursor
		wrapped = cursor == ""
		// perKey is the index entries a batch reads for each key it
		// returns: a guess, then what the batch before read.
		perKey = int64(4)
	)
	for found < maxKeys && len(visits) < budget {
		// About as many keys as the claim still needs: a key too many costs
		// its probes, a batch too few a round trip. Every entry read costs
		// its copy into the batch's derived table and its grouping.
		want := min(budget-len(visits), maxKeys-found+maxKeys/8+8)
		entries := min(max(perKey*int64(want), 64), 8192)
		upTo := ""
		args := []any{w.p.KeyLimit, w.p.Fair, w.c.Queue, w.p.KindKeyLimit, w.kind, w.rate, w.scope, w.name, w.start, w.c.Queue}
		args = append(args, w.claimableArgs...)
		args = append(args, w.c.Queue, after)
		if wrapped && cursor != "" {
			upTo = keyWalkUpToSQL
			args = append(args, cursor)
		}
		args = append(args, entries, want)
		var read int64
		batch, err := sqlbackend.QueryAll(ctx, q, func(s sqlbackend.RowScanner) (keyVisit, error) {
			var (
				v keyVisit
				n int64
			)
			err := s.Scan(&v.key, &n, &v.queueRunning, &v.kindRunning, &v.used, &v.first)
			read += n
			return v, err
		}, fmt.Sprintf(keyWalkSQLFormat, upTo, w.claimable), args...)
		if err != nil {
			return nil, fmt.Errorf("walk the keys: %w", err)
		}
		for i := range batch {
			visits = append(visits, batch[i])
			if w.found(&batch[i]) {
				found++
			}
			if found == maxKeys || len(visits) == budget {
				return visits, nil
			}
		}
		if len(batch) > 0 {
			after = batch[len(batch)-1].key
			perKey = read/int64(len(batch)) + 1
		}
		if len(batch) < want && read < entries {
			// The end of the keys (of the second pass: the cursor).
			if wrapped {
				break
			}
			wrapped, after = true, ""
		}
	}
	return visits, nil
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
