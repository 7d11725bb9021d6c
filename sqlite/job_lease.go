package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// finalizedStates get finalized_at: the final states and stuck.
const finalizedStates = `('completed', 'discarded', 'cancelled', 'stuck')`

// claimUpdate starts the claim statements, up to their picks: it leases
// up to ?6 claimable jobs of queue ?5 in one statement; SQLite has one
// writer, so no other claimer can see the same rows. ?1 owner, ?2 JSON
// object of lease TTLs in ms by kind, ?3 default TTL in ms, ?4 JSON array of
// the kinds whose expiry policy is stuck, ?7 the database clock read in the
// claim's transaction: SQLite evaluates nowExpr again for every row, which
// made up about 40% of a large claim's cost.
const claimUpdate = `UPDATE leasehold_job
SET state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?1,
	leased_at = ?7,
	lease_until = ?7 + 1000 * coalesce(
		lease_ttl_ms,
		(SELECT t.value FROM json_each(?2) AS t WHERE t.key = leasehold_job.kind),
		?3),
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = CASE
		WHEN leasehold_job.kind IN (SELECT s.value FROM json_each(?4) AS s) THEN 'stuck'
		ELSE 'retry' END
WHERE id IN `

// claimGroupSQL is one group of queue ?5's claimable jobs in
// leasehold_job_claim_idx (schema version 11), scheduled by ?7's clock,
// with the extra filter: group 0, the jobs without a key, or 1, those with
// one. Its state list is the index's predicate, which INDEXED BY requires.
// The unary + on scheduled_at keeps the planner on the group's range in
// claim order: statistics taken on a backlog of one queue (ANALYZE, PRAGMA
// optimize) made it skip-scan the whole index on scheduled_at and sort.
func claimGroupSQL(group, filter string) string {
	return `SELECT id, priority, scheduled_at FROM leasehold_job INDEXED BY leasehold_job_claim_idx
		WHERE state IN ('available', 'scheduled', 'retryable')
			AND queue = ?5 AND (flow_key IS NOT NULL) = ` + group + ` AND +scheduled_at <= ?7` + filter
}

// claimSQL is a plain claim with the extra filter of its inner queries:
// its picks are the first ?6 jobs in claim order of the queue's two groups,
// merged (SQLite merges a compound SELECT's ordered arms, each read in the
// index's order, so it reads no more entries than it returns, plus one per
// group, and sorts nothing), none when the queue is paused. The statement
// returns only the columns the claim sets (scanClaim); the rest of each row
// is read after the write transaction (jobsByIDSQL), so that the write
// lock, which every writer of the database waits for, is not held while
// the rows are sent and scanned.
func claimSQL(filter string) string {
	return claimUpdate + `(
	SELECT id FROM (
		` + claimGroupSQL("0", filter) + `
		UNION ALL
		` + claimGroupSQL("1", filter) + `
		ORDER BY priority, scheduled_at, id
		LIMIT ?6)
	WHERE NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?5 AND q.paused_at IS NOT NULL))
RETURNING id, attempt, lease_token, lease_owner, leased_at, lease_until, expiry_policy`
}

// jobsByIDSQL reads the jobs of ?1, a JSON array of IDs.
const jobsByIDSQL = `SELECT ` + jobColumns + `
FROM leasehold_job
WHERE id IN (SELECT value FROM json_each(?1))`

// jobClaimSQL is the plain claim, every kind of the queue. It is kept
// apart from jobClaimKindsSQL so that the common claim carries no kind
// filter at all.
var jobClaimSQL = claimSQL("")

// claimKindFilter restricts a claim to the kinds of the JSON array ?8 (when
// not empty) and never takes those of ?9. The unary + keeps the planner on
// the claim index rather than the kind index: it walks the queue in claim
// order and skips the other kinds.
const claimKindFilter = `
		AND (json_array_length(?8) = 0 OR +kind IN (SELECT value FROM json_each(?8)))
		AND +kind NOT IN (SELECT value FROM json_each(?9))`

// jobClaimKindsSQL is the claim of JobClaimParams with Kinds or
// ExcludeKinds: jobClaimSQL with claimKindFilter.
var jobClaimKindsSQL = claimSQL(claimKindFilter)

// jobHeartbeatSQL renews the leases in ?1, a JSON array of
// {"id", "token", "ttl_ms"}, whose token matches, whose lease owner is ?2,
// that are running and not expired at ?3, the database clock read in the
// renewal's transaction. It returns the IDs renewed.
//
// The unary + on state in jobHeartbeatSQL and jobFinishSQL keeps the
// planner off the state index, so it walks the JSON array and looks each job
// up by ID rather than matching every running job against the whole array.
const jobHeartbeatSQL = `UPDATE leasehold_job
SET lease_until = ?3 + 1000 * l.ttl_ms,
	heartbeat_at = ?3,
	heartbeats = heartbeats + 1
FROM (
	SELECT value ->> '$.id' AS job_id, value ->> '$.token' AS token, value ->> '$.ttl_ms' AS ttl_ms
	FROM json_each(?1)
) AS l
WHERE leasehold_job.id = l.job_id
	AND leasehold_job.lease_token = l.token
	AND leasehold_job.lease_owner = ?2
	AND +leasehold_job.state = 'running'
	AND leasehold_job.lease_until > ?3
RETURNING leasehold_job.id`

// finishState is the state jobFinishSQL writes: the item's, except that a
// job whose cancellation was requested never runs again, so an outcome that
// would let it (retryable, available, scheduled) becomes cancelled. SET
// expressions see the row as it was, so each may repeat it.
const finishState = `CASE
		WHEN leasehold_job.cancel_requested_at IS NOT NULL
			AND f.new_state IN ('available', 'scheduled', 'retryable') THEN 'cancelled'
		ELSE f.new_state END`

// jobFinishSQL ends the leases in ?1, a JSON array of {"id", "token",
// "state", "count_error", "error", "scheduled_at"} with unique IDs, that are
// still held by lease owner ?3 at ?2, the database clock read once per
// transaction. It returns
// the IDs written. The lease fields stay as they were, for the attempt rows.
const jobFinishSQL = `UPDATE leasehold_job
SET state = ` + finishState + `,
	errors = errors + f.count_error,
	last_error = coalesce(f.new_error, last_error),
	scheduled_at = CASE
		WHEN ` + finishState + ` IN ('available', 'scheduled', 'retryable') THEN coalesce(f.next_run, ?2)
		ELSE leasehold_job.scheduled_at END,
	finalized_at = CASE WHEN ` + finishState + ` IN ` + finalizedStates + ` THEN ?2 END
FROM (
	SELECT value ->> '$.id' AS job_id, value ->> '$.token' AS token,
		value ->> '$.state' AS new_state, value ->> '$.count_error' AS count_error,
		value ->> '$.error' AS new_error, value ->> '$.scheduled_at' AS next_run
	FROM json_each(?1)
) AS f
WHERE leasehold_job.id = f.job_id
	AND leasehold_job.lease_token = f.token
	AND leasehold_job.lease_owner = ?3
	AND +leasehold_job.state = 'running'
	AND leasehold_job.lease_until > ?2
RETURNING leasehold_job.id`

// plainFinishState is finishState for jobFinishPlainSQL, whose new state is
// the parameter ?4.
const plainFinishState = `CASE
		WHEN leasehold_job.cancel_requested_at IS NOT NULL
			AND ?4 IN ('available', 'scheduled', 'retryable') THEN 'cancelled'
		ELSE ?4 END`

// jobFinishPlainSQL is jobFinishSQL for items of one state ?4, one outcome
// and one error count ?5 (0 or 1), with no error text and no schedule: ?1
// is a JSON object of lease tokens by job ID ({"12": 3}). Its values are
// numbers, which json_each returns as they are, where the objects of
// jobFinishSQL are each rendered as text and parsed again; a batch of plain
// outcomes (the completed jobs of a drain) costs the database about half.
const jobFinishPlainSQL = `UPDATE leasehold_job
SET state = ` + plainFinishState + `,
	errors = errors + ?5,
	scheduled_at = CASE
		WHEN ` + plainFinishState + ` IN ('available', 'scheduled', 'retryable') THEN ?2
		ELSE leasehold_job.scheduled_at END,
	finalized_at = CASE WHEN ` + plainFinishState + ` IN ` + finalizedStates + ` THEN ?2 END
FROM (SELECT CAST(key AS INTEGER) AS job_id, value AS token FROM json_each(?1)) AS f
WHERE leasehold_job.id = f.job_id
	AND leasehold_job.lease_token = f.token
	AND leasehold_job.lease_owner = ?3
	AND +leasehold_job.state = 'running'
	AND leasehold_job.lease_until > ?2
RETURNING leasehold_job.id`

// attemptInsertPlainSQL appends the attempt rows of the leases
// jobFinishPlainSQL has just ended: ?1 is the JSON array of their IDs, ?2
// the finish time, ?3 the items' state and ?4 their outcome (cancelled for a
// job that jobFinishPlainSQL cancelled instead).
const attemptInsertPlainSQL = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, coalesce(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, ?2,
	CASE WHEN state = 'cancelled' AND ?3 IN ('available', 'scheduled', 'retryable')
		THEN 'cancelled' ELSE ?4 END,
	NULL
FROM leasehold_job
WHERE id IN (SELECT value FROM json_each(?1))`

// attemptInsertFinishedSQL appends the attempt rows of the leases JobFinish
// has just ended: ?1 is the JSON array of jobFinishSQL restricted to the
// items written, ?2 the finish time. It reads the jobs after the update: one
// that jobFinishSQL cancelled instead of the item's state (finishState)
// gets outcome cancelled.
const attemptInsertFinishedSQL = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT j.id, j.attempt, j.lease_token, coalesce(j.lease_owner, ''), j.leased_at, j.lease_until,
	j.heartbeat_at, j.heartbeats, ?2,
	CASE WHEN j.state = 'cancelled' AND f.value ->> '$.state' IN ('available', 'scheduled', 'retryable')
		THEN 'cancelled' ELSE f.value ->> '$.outcome' END,
	f.value ->> '$.error'
FROM json_each(?1) AS f
JOIN leasehold_job AS j ON j.id = f.value ->> '$.id'`

// expiredStuck decides, in jobExpireSQL, whether an expired job becomes
// stuck: its policy says so, or its expiries reach ?2 (when > 0).
const expiredStuck = `(expiry_policy = 'stuck' OR (?2 > 0 AND expiries + 1 >= ?2))`

// expiredEnds decides, in jobExpireSQL, whether an expired job leaves the
// queue: it becomes cancelled (its cancellation was requested) or stuck.
const expiredEnds = `(cancel_requested_at IS NOT NULL OR ` + expiredStuck + `)`

// jobExpireSQL reclaims up to ?1 running jobs whose lease ended before ?3,
// the database clock read once per transaction; with ?4 or ?5 (a JSON array)
// set, only those of queue ?4 or of a kind in ?5. ?2 is MaxExpiries. A job
// whose cancellation was requested becomes cancelled, never available or
// stuck: it must not run again. The lease fields stay as they were, for the
// attempt rows and for operators.
const jobExpireSQL = `UPDATE leasehold_job
SET expiries = expiries + 1,
	state = CASE
		WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
		WHEN ` + expiredStuck + ` THEN 'stuck'
		ELSE 'available' END,
	scheduled_at = CASE WHEN ` + expiredEnds + ` THEN scheduled_at ELSE ?3 END,
	finalized_at = CASE WHEN ` + expiredEnds + ` THEN ?3 END,
	last_error = 'lease expired: owner ' || coalesce(lease_owner, '') || ', token ' || lease_token
WHERE id IN (
	SELECT id FROM leasehold_job
	WHERE state = 'running' AND lease_until < ?3
		AND (?4 = '' AND json_array_length(?5) = 0 OR queue = ?4 OR kind IN (SELECT value FROM json_each(?5)))
	ORDER BY lease_until, id
	LIMIT ?1)
RETURNING ` + jobColumns

// attemptInsertExpiredSQL appends the lease_expired attempt rows of the
// jobs in ?1 (a JSON array of IDs) that JobExpire has just reclaimed, with
// finished_at ?2.
const attemptInsertExpiredSQL = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, coalesce(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, ?2, 'lease_expired', last_error
FROM leasehold_job
WHERE id IN (SELECT value FROM json_each(?1))`

// claimableWhere selects the claimable jobs of queue ?1 for the existence
// checks below, on the claim index: statistics taken on a backlog (one
// queue, one state) made the planner scan the table instead, through every
// finished job kept in it, a few milliseconds per check. The unary + is
// claimGroupSQL's.
const claimableWhere = ` INDEXED BY leasehold_job_claim_idx
WHERE state IN ('available', 'scheduled', 'retryable')
	AND queue = ?1 AND +scheduled_at <= ` + nowExpr + `
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ?1 AND q.paused_at IS NOT NULL)`

// jobClaimableExistsSQL tells whether queue ?1 has a claimable job, so an
// empty queue is polled with a read, not a write transaction.
const jobClaimableExistsSQL = `SELECT 1 FROM leasehold_job` + claimableWhere + `
LIMIT 1`

// jobClaimableKindsExistsSQL is jobClaimableExistsSQL for a claim
// restricted to the kinds of the JSON array ?2 (when not empty) and never
// those of ?3, so a queue holding only other kinds is not claimed from.
const jobClaimableKindsExistsSQL = `SELECT 1 FROM leasehold_job` + claimableWhere + `
	AND (json_array_length(?2) = 0 OR +kind IN (SELECT value FROM json_each(?2)))
	AND +kind NOT IN (SELECT value FROM json_each(?3))
LIMIT 1`

// jobExpiredExistsSQL tells whether a running job's lease has expired.
const jobExpiredExistsSQL = `SELECT 1 FROM leasehold_job
WHERE state = 'running' AND lease_until < ` + nowExpr + `
LIMIT 1`

// JobClaim leases up to params.Max jobs of params.Queue in one UPDATE ...
// RETURNING, in its own immediate transaction on the pool, and then reads
// the claimed rows by ID (on the pool after the commit, without the write
// lock). On the pool an empty queue is seen by a read first, without
// waiting for the write lock. A claim with Kinds or ExcludeKinds runs a
// statement of its own, so the plain claim keeps its shape.
func (e *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	kindTTL := make(map[string]int64, len(params.KindLeaseTTL))
	for kind, ttl := range params.KindLeaseTTL {
		if ms, ok := millis(ttl).(int64); ok {
			kindTTL[kind] = ms
		}
	}
	kindTTLJSON, err := json.Marshal(kindTTL)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: encode lease TTLs: %w", err)
	}
	stuck := params.StuckKinds
	if stuck == nil {
		stuck = []string{}
	}
	stuckJSON, err := json.Marshal(stuck)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: encode stuck kinds: %w", err)
	}
	defaultTTL, _ := millis(params.DefaultLeaseTTL).(int64)

	claim, exists := jobClaimSQL, jobClaimableExistsSQL
	// args[6], the clock, is read in the claim's transaction.
	args := []any{params.Owner, string(kindTTLJSON), defaultTTL, string(stuckJSON), params.Queue, max(params.Max, 1), nil}
	existsArgs := []any{params.Queue}
	if len(params.Kinds) > 0 || len(params.ExcludeKinds) > 0 {
		kinds, err := jsonStrings(params.Kinds)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: encode kinds: %w", err)
		}
		exclude, err := jsonStrings(params.ExcludeKinds)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: encode excluded kinds: %w", err)
		}
		claim, exists = jobClaimKindsSQL, jobClaimableKindsExistsSQL
		args = append(args, kinds, exclude)
		existsArgs = append(existsArgs, kinds, exclude)
	}

	if e.onPool {
		if found, err := e.exists(ctx, exists, existsArgs...); err != nil || !found {
			if err != nil {
				return nil, fmt.Errorf("claim jobs: %w", err)
			}
			return []*leasetype.JobRow{}, nil
		}
	}
	var leases []*claimedLease
	err = e.write(ctx, func(q querier) error {
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		args[6] = now
		rows, err := q.QueryContext(ctx, claim, args...)
		if err != nil {
			return err
		}
		leases, err = sqlbackend.ScanAll(rows, scanClaim)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	// The claim committed: its rows are read even when ctx ended since (the
	// client stopping), or its jobs would stay leased to no one until their
	// leases expired.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimedReadTimeout)
	defer cancel()
	jobs, err := e.claimedJobs(readCtx, leases)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority),
			a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// claimedLease is what a claim statement returns of a job: the columns it
// set.
type claimedLease struct {
	id, attempt, token int64
	owner              string
	leasedAt, until    int64
	expiryPolicy       string
}

// scanClaim reads a row of a claim statement's RETURNING clause.
func scanClaim(s sqlbackend.RowScanner) (*claimedLease, error) {
	var l claimedLease
	err := s.Scan(&l.id, &l.attempt, &l.token, &l.owner, &l.leasedAt, &l.until, &l.expiryPolicy)
	return &l, err
}

// claimedJobs reads the rows of the jobs just claimed and sets on each the
// lease as the claim granted it. The read runs after the claim's commit on
// the pool: a job may have changed since (a cancellation requested), which
// the row then shows; its lease fields are the claim's all the same, so that
// a lease lost meanwhile is fenced off by its token like any other. A job
// deleted meanwhile is left out.
// claimedReadTimeout bounds the read of a committed claim's rows.
const claimedReadTimeout = 10 * time.Second

func (e *executor) claimedJobs(ctx context.Context, leases []*claimedLease) ([]*leasetype.JobRow, error) {
	if len(leases) == 0 {
		return []*leasetype.JobRow{}, nil
	}
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]*claimedLease, len(leases))
	ids := make([]byte, 0, 12*len(leases)+2)
	ids = append(ids, '[')
	for i, l := range leases {
		byID[l.id] = l
		if i > 0 {
			ids = append(ids, ',')
		}
		ids = strconv.AppendInt(ids, l.id, 10)
	}
	ids = append(ids, ']')
	rows, err := q.QueryContext(ctx, jobsByIDSQL, string(ids))
	if err != nil {
		return nil, fmt.Errorf("read claimed jobs: %w", err)
	}
	jobs, err := sqlbackend.ScanAll(rows, scanJob)
	if err != nil {
		return nil, fmt.Errorf("read claimed jobs: %w", err)
	}
	for _, j := range jobs {
		l := byID[j.ID]
		leasedAt, until := fromMicros(l.leasedAt), fromMicros(l.until)
		j.State = leasetype.JobStateRunning
		j.Attempt, j.LeaseToken, j.LeaseOwner = int(l.attempt), l.token, l.owner
		j.LeasedAt, j.LeaseUntil = &leasedAt, &until
		j.HeartbeatAt, j.Heartbeats = nil, 0
		j.ExpiryPolicy = leasetype.ExpiryPolicy(l.expiryPolicy)
	}
	return jobs, nil
}

// jsonStrings encodes a list of strings as a JSON array, nil as [].
func jsonStrings(list []string) (string, error) {
	if list == nil {
		list = []string{}
	}
	b, err := json.Marshal(list)
	return string(b), err
}

// exists runs a query of one row or none, outside any transaction of the
// executor's own; a read in WAL mode waits for no writer.
func (e *executor) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := e.q.QueryRowContext(ctx, query, args...).Scan(&one)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// leaseRenewal is the JSON form of a driver.LeaseRenewal for jobHeartbeatSQL.
type leaseRenewal struct {
	ID    int64 `json:"id"`
	Token int64 `json:"token"`
	TTLMS int64 `json:"ttl_ms"`
}

// JobHeartbeat renews leases in one UPDATE ... FROM json_each.
func (e *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error) {
	if len(params.Leases) == 0 {
		return []int64{}, nil
	}
	leases := make([]leaseRenewal, len(params.Leases))
	for i, l := range params.Leases {
		ms, _ := millis(l.TTL).(int64)
		leases[i] = leaseRenewal{ID: l.ID, Token: l.Token, TTLMS: ms}
	}
	leasesJSON, err := json.Marshal(leases)
	if err != nil {
		return nil, fmt.Errorf("renew leases: encode: %w", err)
	}
	var ids []int64
	err = e.write(ctx, func(q querier) error {
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		rows, err := q.QueryContext(ctx, jobHeartbeatSQL, string(leasesJSON), params.Owner, now)
		if err != nil {
			return err
		}
		ids, err = sqlbackend.ScanIDs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// finishItem is the JSON form of a driver.JobFinish for jobFinishSQL and
// attemptInsertFinishedSQL.
type finishItem struct {
	ID          int64   `json:"id"`
	Token       int64   `json:"token"`
	State       string  `json:"state"`
	CountError  int     `json:"count_error"`
	Error       *string `json:"error"`
	ScheduledAt *int64  `json:"scheduled_at"`
	Outcome     string  `json:"outcome"`
}

// JobFinish ignores params.TxBound: SQLite has no server to abort a caller's
// transaction. One that holds a completion holds the database's write lock
// until it ends, so nothing else writes meanwhile: no other holder, and no
// expirer, can touch the job.
//
// JobFinish ends the leases of params.Items in one transaction: it reads the
// clock, then runs one conditional UPDATE ... FROM json_each and one INSERT
// ... SELECT of the attempt rows of the leases it ended, for each group of
// plain items (no error text, no schedule) of one state, outcome and error
// count (jobFinishPlainSQL), and once for all other items (jobFinishSQL).
// A batch of completions is three statements whatever its size. It
// returns the IDs written in input order.
func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	// An ID given twice can be written at most once: keep its first item.
	var (
		plain  []*plainFinish
		other  []finishItem
		groups = map[plainKey]*plainFinish{}
		seen   = make(map[int64]bool, len(params.Items))
	)
	for _, it := range params.Items {
		if seen[it.ID] {
			continue
		}
		seen[it.ID] = true
		countError := 0
		if it.CountError {
			countError = 1
		}
		if it.Error == "" && it.ScheduledAt == nil {
			k := plainKey{state: string(it.State), outcome: string(it.Outcome), countError: countError}
			g := groups[k]
			if g == nil {
				g = &plainFinish{plainKey: k, tokens: []byte{'{'}}
				groups[k] = g
				plain = append(plain, g)
			}
			g.add(it.ID, it.Token)
			continue
		}
		fi := finishItem{ID: it.ID, Token: it.Token, State: string(it.State), Outcome: string(it.Outcome), CountError: countError}
		if it.Error != "" {
			fi.Error = &it.Error
		}
		if it.ScheduledAt != nil {
			us := it.ScheduledAt.UnixMicro()
			fi.ScheduledAt = &us
		}
		other = append(other, fi)
	}
	if len(seen) == 0 {
		return []int64{}, nil
	}
	var otherJSON []byte
	if len(other) > 0 {
		var err error
		if otherJSON, err = json.Marshal(other); err != nil {
			return nil, fmt.Errorf("finish jobs: encode: %w", err)
		}
	}
	done := make(map[int64]bool, len(seen))
	err := e.write(ctx, func(q querier) error {
		clear(done)
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for _, g := range plain {
			if err := g.write(ctx, q, now, params.Owner, done); err != nil {
				return err
			}
		}
		if len(other) > 0 {
			return finishOther(ctx, q, now, params.Owner, other, otherJSON, done)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	written := make([]int64, 0, len(done))
	for _, it := range params.Items {
		if done[it.ID] {
			written = append(written, it.ID)
			delete(done, it.ID)
		}
	}
	return written, nil
}

// plainKey is what the plain items of one jobFinishPlainSQL share.
type plainKey struct {
	state, outcome string
	countError     int
}

// plainFinish is a group of plain items: their lease tokens by ID, as the
// JSON object jobFinishPlainSQL takes.
type plainFinish struct {
	plainKey
	tokens []byte
	n      int
}

func (g *plainFinish) add(id, token int64) {
	if g.n > 0 {
		g.tokens = append(g.tokens, ',')
	}
	g.n++
	g.tokens = append(g.tokens, '"')
	g.tokens = strconv.AppendInt(g.tokens, id, 10)
	g.tokens = append(g.tokens, '"', ':')
	g.tokens = strconv.AppendInt(g.tokens, token, 10)
}

// write ends the group's leases and appends their attempt rows, adding the
// IDs written to done.
func (g *plainFinish) write(ctx context.Context, q querier, now int64, owner string, done map[int64]bool) error {
	rows, err := q.QueryContext(ctx, jobFinishPlainSQL, string(g.tokens)+"}", now, owner, g.state, g.countError)
	if err != nil {
		return err
	}
	ids, err := sqlbackend.ScanIDs(rows)
	if err != nil || len(ids) == 0 {
		return err
	}
	idsJSON := make([]byte, 0, 12*len(ids)+2)
	idsJSON = append(idsJSON, '[')
	for i, id := range ids {
		done[id] = true
		if i > 0 {
			idsJSON = append(idsJSON, ',')
		}
		idsJSON = strconv.AppendInt(idsJSON, id, 10)
	}
	idsJSON = append(idsJSON, ']')
	if _, err := q.ExecContext(ctx, attemptInsertPlainSQL, string(idsJSON), now, g.state, g.outcome); err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	return nil
}

// finishOther ends the leases of the items that are not plain (they carry
// an error text or a schedule), itemsJSON being their JSON, and appends
// their attempt rows, adding the IDs written to done.
func finishOther(ctx context.Context, q querier, now int64, owner string, items []finishItem, itemsJSON []byte, done map[int64]bool) error {
	rows, err := q.QueryContext(ctx, jobFinishSQL, string(itemsJSON), now, owner)
	if err != nil {
		return err
	}
	ids, err := sqlbackend.ScanIDs(rows)
	if err != nil || len(ids) == 0 {
		return err
	}
	isDone := make(map[int64]bool, len(ids))
	for _, id := range ids {
		isDone[id] = true
	}
	ended := make([]finishItem, 0, len(ids))
	for _, it := range items {
		if isDone[it.ID] {
			ended = append(ended, it)
			done[it.ID] = true
		}
	}
	endedJSON, err := json.Marshal(ended)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, attemptInsertFinishedSQL, string(endedJSON), now); err != nil {
		return fmt.Errorf("record attempts: %w", err)
	}
	return nil
}

// JobExpire reclaims expired leases in one transaction: an UPDATE ...
// RETURNING of the jobs, then one INSERT ... SELECT of their attempt rows.
// On the pool a read first skips the write lock when no lease has expired.
func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = 1000
	}
	if e.onPool {
		if found, err := e.exists(ctx, jobExpiredExistsSQL); err != nil || !found {
			if err != nil {
				return nil, fmt.Errorf("expire leases: %w", err)
			}
			return []*leasetype.JobRow{}, nil
		}
	}
	kinds, err := jsonStrings(params.Kinds)
	if err != nil {
		return nil, fmt.Errorf("expire leases: encode kinds: %w", err)
	}
	var jobs []*leasetype.JobRow
	err = e.write(ctx, func(q querier) error {
		var now int64
		if err := q.QueryRowContext(ctx, nowSQL).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		rows, err := q.QueryContext(ctx, jobExpireSQL, limit, params.MaxExpiries, now, params.Queue, kinds)
		if err != nil {
			return err
		}
		if jobs, err = sqlbackend.ScanAll(rows, scanJob); err != nil || len(jobs) == 0 {
			return err
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, attemptInsertExpiredSQL, string(idsJSON), now); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}
