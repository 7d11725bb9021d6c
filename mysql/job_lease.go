package mysql

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// The lease life cycle (claim, heartbeat, finish, expire): each step is a
// locking read that applies the whole condition and locks the rows it
// returns, then writes to exactly those rows in the same transaction, on the
// database clock the locking read returned.

// claimableStates are the states of a claimable job (claim_queue is set).
const claimableStates = `('available', 'scheduled', 'retryable')`

// finalizedStates get finalized_at: the final states and stuck.
const finalizedStates = `('completed', 'discarded', 'cancelled', 'stuck')`

// jobClaimableExistsSQLFormat tells whether queue ?1 has a claimable job and is not
// paused, so an empty or paused queue is polled with one read and no
// transaction. The %s is the claim's kind filter (claimKindFilter), empty
// for a plain claim; its arguments follow the two queue names.
const jobClaimableExistsSQLFormat = `SELECT 1 FROM leasehold_job
WHERE claim_queue = ? AND scheduled_at <= ` + nowExpr + `
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL)%s
LIMIT 1`

// jobClaimPickSQLFormat locks up to the last argument's count of claimable jobs of
// queue (first argument after the lease expressions' ones, twice), in claim
// order, skipping rows other claimers hold, through the claim index on
// (claim_queue, priority, scheduled_at, id) without a sort. It reads the
// whole rows (the locking read reaches each clustered row anyway) and, in
// front of them, the database clock and the lease the claim's UPDATE will
// write from it: claimLeaseUntilFormat and claimPolicyFormat, the very
// expressions of jobClaimUpdateSQLFormat on the same locked rows and the
// same time, so the rows need no read after the UPDATE. The paused check in
// the subquery is a plain consistent read: it locks nothing, so claimers
// never skip or wait on the queue's control row. The four %s are the TTL
// and stuck expressions (as for jobClaimUpdateSQLFormat), then the kind
// filter, as in jobClaimableExistsSQLFormat: it tests each row the index
// walk reaches, so the plan stays the same.
const jobClaimPickSQLFormat = `SELECT ` + nowExpr + `, ` + nowExpr + ` + INTERVAL ` + claimTTLFormat + ` MICROSECOND, ` + claimPolicyFormat + `,
	` + jobColumns + `
FROM leasehold_job
WHERE claim_queue = ? AND scheduled_at <= ` + nowExpr + `
	AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = ? AND q.paused_at IS NOT NULL)%s
ORDER BY priority, scheduled_at, id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// The plain claim's exists read (no kind filter), built once.
var jobClaimableExistsSQL = fmt.Sprintf(jobClaimableExistsSQLFormat, "")

// claimTTLFormat is a claimed job's lease TTL in microseconds: its own
// lease_ttl_ms, else its kind's (the %s: a CASE on kind, or NULL), else the
// default (the argument after the CASE's).
const claimTTLFormat = `COALESCE(lease_ttl_ms * 1000, %s, ?)`

// claimPolicyFormat is a claimed job's expiry policy: stuck when the %s (kind
// IN (...), or FALSE) holds.
const claimPolicyFormat = `IF(%s, 'stuck', 'retry')`

// jobClaimUpdateSQLFormat leases the picked jobs. JobClaim fills in the three %s: the
// per-kind TTL expression in microseconds (a CASE on kind, or NULL), the
// stuck-kind test (kind IN (...), or FALSE) and the ID list (literal IDs,
// idList, or placeholders). Arguments: owner, now (twice), the CASE's
// arguments, the default TTL in microseconds, the stuck kinds, then the IDs
// of placeholders.
const jobClaimUpdateSQLFormat = `UPDATE leasehold_job
SET attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = ?,
	leased_at = CAST(? AS DATETIME(6)),
	lease_until = CAST(? AS DATETIME(6)) + INTERVAL ` + claimTTLFormat + ` MICROSECOND,
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = ` + claimPolicyFormat + `,
	state = 'running'
WHERE id IN (%s) AND state IN ` + claimableStates

// jsonLeases is the JSON_TABLE of a heartbeat's leases: [{"id", "token",
// "ttl_us"}].
const jsonLeases = `JSON_TABLE(?, '$[*]' COLUMNS (
	l_id BIGINT PATH '$.id',
	l_token BIGINT PATH '$.token',
	l_ttl_us BIGINT PATH '$.ttl_us')) AS l`

// jobHeartbeatPickSQL locks the leases of the first argument that are still
// held by the lease owner of the second: token and owner match, running,
// not expired. The statements that follow a pick write only the rows it
// locked.
const jobHeartbeatPickSQL = `SELECT j.id, ` + nowExpr + `
FROM ` + jsonLeases + `
JOIN leasehold_job j ON j.id = l.l_id
WHERE j.lease_token = l.l_token AND j.lease_owner = ? AND j.state = 'running' AND j.lease_until > ` + nowExpr + `
FOR UPDATE`

// jobHeartbeatSQL renews the leases of the first argument (those the pick
// locked) from the time in the other two. It writes only lease_until, heartbeat_at and heartbeats, none of
// them indexed.
const jobHeartbeatSQL = `UPDATE leasehold_job j
JOIN ` + jsonLeases + ` ON j.id = l.l_id
SET j.lease_until = CAST(? AS DATETIME(6)) + INTERVAL l.l_ttl_us MICROSECOND,
	j.heartbeat_at = CAST(? AS DATETIME(6)),
	j.heartbeats = j.heartbeats + 1
WHERE j.lease_token = l.l_token AND j.state = 'running'`

// jsonFinish is the JSON_TABLE of JobFinish's items.
const jsonFinish = `JSON_TABLE(?, '$[*]' COLUMNS (
	f_id BIGINT PATH '$.id',
	f_token BIGINT PATH '$.token',
	f_state VARCHAR(16) PATH '$.state',
	f_outcome VARCHAR(16) PATH '$.outcome',
	f_count_error INT PATH '$.count_error',
	f_error LONGTEXT PATH '$.error',
	f_scheduled_at VARCHAR(32) PATH '$.scheduled_at')) AS f`

// jsonLeaseRefs is the JSON_TABLE of a finish's leases: [[id, token], ...],
// two numbers an item, which the server reads faster than jsonFinish's
// objects.
const jsonLeaseRefs = `JSON_TABLE(?, '$[*]' COLUMNS (
	r_id BIGINT PATH '$[0]',
	r_token BIGINT PATH '$[1]')) AS r`

// jobFinishPickSQL locks the leases of the first argument (jsonLeaseRefs)
// still held by the lease owner of the second, and reads whether each job
// has dependents: the lock keeps has_dependents as read until the commit,
// since a new dependent locks its parents first (applyDependencies).
const jobFinishPickSQL = `SELECT j.id, ` + nowExpr + `, j.has_dependents
FROM ` + jsonLeaseRefs + `
JOIN leasehold_job j ON j.id = r.r_id
WHERE j.lease_token = r.r_token AND j.lease_owner = ? AND j.state = 'running' AND j.lease_until > ` + nowExpr + `
FOR UPDATE`

// jobCompleteHeldSQL completes, without a locking read before it, the
// jobs of the leases of the first argument (jsonLeaseRefs) that the lease
// owner of the second still holds and that have no dependents: token and
// owner match, running, not expired, has_dependents false, all read by the
// UPDATE itself under the row lock it takes, finalized at the database
// clock. FORCE INDEX keeps the primary key the way in, from the items:
// the state index would walk every running job. completeHeld sends it
// only with attemptInsertCompletedAllSQLFormat after it.
const jobCompleteHeldSQL = `UPDATE leasehold_job j FORCE INDEX (PRIMARY)
JOIN ` + jsonLeaseRefs + ` ON j.id = r.r_id
SET j.finalized_at = ` + nowExpr + `, j.state = 'completed'
WHERE j.lease_token = r.r_token AND j.lease_owner = ? AND j.state = 'running'
	AND j.lease_until > ` + nowExpr + ` AND NOT j.has_dependents`

// attemptInsertCompletedAllSQLFormat appends the attempt rows of the jobs
// of the first %s (their IDs) when the statement just before it,
// jobCompleteHeldSQL, completed all of them (ROW_COUNT() is that
// statement's count, the second %d the number of IDs), and none
// otherwise. When all were completed the IDs are exactly the rows that
// UPDATE wrote and locked: an attempt row for each, finished at the
// finalized_at it wrote, in the same transaction.
const attemptInsertCompletedAllSQLFormat = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, COALESCE(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, finalized_at, 'completed', NULL
FROM leasehold_job
WHERE id IN (%s) AND ROW_COUNT() = %d`

// rowCountSQL reads the number of rows the statement before it wrote.
const rowCountSQL = `SELECT ROW_COUNT()`

// attemptInsertCompletedSQLFormat appends the attempt rows of completions
// (the %s: their IDs), finished at the argument: what
// attemptInsertFinishedSQL writes for an item that completes with no error,
// without an item to read. The pick locked the jobs running with the
// tokens given, and nothing else can change them before the commit: the
// IDs are the whole condition, and the primary key the only way in (a test
// of state would let the optimizer walk the state index instead).
const attemptInsertCompletedSQLFormat = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, COALESCE(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, CAST(? AS DATETIME(6)), 'completed', NULL
FROM leasehold_job
WHERE id IN (%s)`

// jobCompleteSQLFormat completes the jobs of the %s (their IDs, locked by
// the pick as for attemptInsertCompletedSQLFormat) at the argument: what
// jobFinishSQL writes for an item that completes with no error (a
// completion never gives way to a cancellation request).
const jobCompleteSQLFormat = `UPDATE leasehold_job
SET finalized_at = CAST(? AS DATETIME(6)), state = 'completed'
WHERE id IN (%s)`

// finishCancelled tells whether an item's outcome gives way to a
// cancellation request: the job was asked to stop, and the item would let it
// run again (retryable, available, scheduled). It reads only columns the
// finish does not write, so every assignment may use it.
const finishCancelled = `(j.cancel_requested_at IS NOT NULL AND f.f_state IN ('retryable', 'available', 'scheduled'))`

// finishState is the state an item actually ends in.
const finishState = `IF(` + finishCancelled + `, 'cancelled', f.f_state)`

// attemptInsertFinishedSQL appends the attempt rows of the items (those
// the pick locked), finished at a time: arguments time, then items. It runs
// before the state change; the lease fields stay as they were anyway. A
// cancelled job's attempt says cancelled and keeps the item's error text.
const attemptInsertFinishedSQL = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT j.id, j.attempt, j.lease_token, COALESCE(j.lease_owner, ''), j.leased_at, j.lease_until,
	j.heartbeat_at, j.heartbeats, CAST(? AS DATETIME(6)),
	IF(` + finishCancelled + `, 'cancelled', f.f_outcome), f.f_error
FROM ` + jsonFinish + `
JOIN leasehold_job j ON j.id = f.f_id
WHERE j.lease_token = f.f_token AND j.state = 'running'`

// jobFinishSQL ends the leases of the first argument (those the pick
// locked) at the time in the other three, in finishState. No assignment
// reads a column an earlier one wrote (finishState reads j.cancel_requested_at
// and the item only).
const jobFinishSQL = `UPDATE leasehold_job j
JOIN ` + jsonFinish + ` ON j.id = f.f_id
SET j.scheduled_at = CASE
		WHEN ` + finishCancelled + ` THEN j.scheduled_at
		WHEN f.f_state IN ('retryable', 'scheduled') THEN COALESCE(CAST(f.f_scheduled_at AS DATETIME(6)), CAST(? AS DATETIME(6)))
		WHEN f.f_state = 'available' THEN CAST(? AS DATETIME(6))
		ELSE j.scheduled_at END,
	j.errors = j.errors + f.f_count_error,
	j.last_error = COALESCE(f.f_error, j.last_error),
	j.finalized_at = IF(` + finishState + ` IN ` + finalizedStates + `, CAST(? AS DATETIME(6)), NULL),
	j.state = ` + finishState + `
WHERE j.lease_token = f.f_token AND j.state = 'running'`

// expiredStuck decides whether an expired job becomes stuck: its policy says
// so, or its expiries reach MaxExpiries (when > 0). Its two arguments are
// MaxExpiries.
const expiredStuck = `(expiry_policy = 'stuck' OR (? > 0 AND expiries + 1 >= ?))`

// jobExpireCandidatesSQL finds up to ?1 running jobs whose lease has
// expired, without locking anything: a consistent read over the running
// rows (running_queue is set exactly while a job runs, and indexed). A
// locking read here would lock every running row it examines, expired or
// not, until the watcher's transaction ends, and hold up the heartbeats and
// outcomes of healthy workers.
const jobExpireCandidatesSQL = `SELECT id FROM leasehold_job
WHERE running_queue IS NOT NULL AND state = 'running' AND lease_until < ` + nowExpr + `
LIMIT ?`

// jobExpireCandidatesOfSQLFormat is jobExpireCandidatesSQL restricted to the
// running jobs of a queue and of some kinds, each read on its running
// index. Its arguments: the queue, the kinds (the %s: their placeholders),
// the limit.
const jobExpireCandidatesOfSQLFormat = `SELECT id FROM leasehold_job
WHERE (running_queue = ? OR running_kind IN (%s)) AND state = 'running' AND lease_until < ` + nowExpr + `
LIMIT ?`

// jobExpirePickSQL locks the candidates (the %s: their IDs) that are
// still running with an expired lease, by primary key, skipping rows others
// hold (a finishing worker, a concurrent watcher).
const jobExpirePickSQL = `SELECT id, ` + nowExpr + ` FROM leasehold_job
WHERE id IN (%s) AND state = 'running' AND lease_until < ` + nowExpr + `
FOR UPDATE SKIP LOCKED`

// expiredFinal decides whether an expired job leaves the queue instead of
// becoming available: it was asked to stop (it becomes cancelled) or it
// becomes stuck. Its two arguments are MaxExpiries.
const expiredFinal = `(cancel_requested_at IS NOT NULL OR ` + expiredStuck + `)`

// jobExpireSQLFormat reclaims the picked jobs (the %s: their IDs) at now. Arguments:
// MaxExpiries four times, now, MaxExpiries twice, now, the IDs. A job asked
// to stop becomes cancelled, never available or stuck.
// The lease fields stay as they were, for the attempt rows and operators;
// expiries is written last, after the assignments that read it.
const jobExpireSQLFormat = `UPDATE leasehold_job
SET state = CASE
		WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
		WHEN ` + expiredStuck + ` THEN 'stuck'
		ELSE 'available' END,
	scheduled_at = IF(` + expiredFinal + `, scheduled_at, CAST(? AS DATETIME(6))),
	finalized_at = IF(` + expiredFinal + `, CAST(? AS DATETIME(6)), NULL),
	last_error = CONCAT('lease expired: owner ', COALESCE(lease_owner, ''),
		', token ', lease_token,
		', lease until ', DATE_FORMAT(lease_until, '%%Y-%%m-%%dT%%H:%%i:%%s.%%fZ')),
	expiries = expiries + 1
WHERE id IN (%s) AND state = 'running'`

// jobAttemptInsertExpiredSQLFormat appends the lease_expired attempt rows of the jobs
// JobExpire has just reclaimed (the %s: their IDs), finished at the argument.
const jobAttemptInsertExpiredSQLFormat = `INSERT INTO leasehold_attempt
	(job_id, attempt, token, owner, leased_at, lease_until,
	 last_heartbeat_at, heartbeats, finished_at, outcome, error)
SELECT id, attempt, lease_token, COALESCE(lease_owner, ''), leased_at, lease_until,
	heartbeat_at, heartbeats, CAST(? AS DATETIME(6)), 'lease_expired', last_error
FROM leasehold_job
WHERE id IN (%s)`

// JobClaim leases up to params.Max jobs of params.Queue in one short
// transaction: a SELECT ... FOR UPDATE SKIP LOCKED of the jobs in claim
// order, which reads them whole along with the lease to come, and one
// UPDATE of exactly those rows (fencing token and attempt up by one). In one
// of the driver's own transactions that is two round trips, the first
// beginning the transaction and the second committing it (connTx). On the
// pool an empty or paused queue is seen by a read first, without a
// transaction. params.Kinds and params.ExcludeKinds add a kind filter to
// both; without them the exists read is the plain one.
func (e *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	c := newClaimQuery(params)
	if e.onPool {
		found, err := e.exists(ctx, c.exists.query, c.exists.args...)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: %w", err)
		}
		if !found {
			return []*leasetype.JobRow{}, nil
		}
	}
	var jobs []*leasetype.JobRow
	err := e.writeEndInDriverTx(ctx, func(q querier) ([]stmt, error) {
		var (
			last []stmt
			err  error
		)
		jobs, last, err = c.run(ctx, q, nil)
		return last, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	if jobs == nil {
		jobs = []*leasetype.JobRow{}
	}
	return jobs, nil
}

// claimQuery is the SQL of a plain claim (JobClaim's): the exists read,
// the locking read and the lease its UPDATE grants.
type claimQuery struct {
	exists, pick stmt
	lease        *claimLease
	owner        string
}

// newClaimQuery builds the statements of the claim of params.
func newClaimQuery(params *driver.JobClaimParams) *claimQuery {
	existsQuery := jobClaimableExistsSQL
	filter, filterArgs := claimKindFilter(params.Kinds, params.ExcludeKinds)
	if filter != "" {
		existsQuery = fmt.Sprintf(jobClaimableExistsSQLFormat, filter)
	}
	queueArgs := append([]any{params.Queue, params.Queue}, filterArgs...)
	lease := newClaimLease(params)
	pickArgs := append(lease.exprArgs(), queueArgs...)
	pickArgs = append(pickArgs, max(params.Max, 1))
	return &claimQuery{
		exists: stmt{query: existsQuery, args: queueArgs},
		pick:   stmt{query: fmt.Sprintf(jobClaimPickSQLFormat, lease.ttlExpr, lease.stuckExpr, filter), args: pickArgs},
		lease:  lease,
		owner:  params.Owner,
	}
}

// run runs the claim's locking read in q after before, statements of the
// same transaction that return no rows: in a connTx they go in front of
// it, in the same round trip, elsewhere one after the other. It returns
// the jobs in claim order as the claim's UPDATE leaves them, and that
// UPDATE for the caller to send last (with the COMMIT); none of either
// when no job is claimable.
func (c *claimQuery) run(ctx context.Context, q querier, before []stmt) ([]*leasetype.JobRow, []stmt, error) {
	pick := c.pick
	if len(before) > 0 {
		if _, ok := q.(*connTx); ok {
			pick.query, pick.args = joinStmts(append(slices.Clip(before), pick))
		} else if err := execEach(ctx, q, before); err != nil {
			return nil, nil, err
		}
	}
	rows, err := q.QueryContext(ctx, pick.query, pick.args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	jobs, err := scanClaimed(rows, c.owner)
	if err != nil || len(jobs) == 0 {
		return nil, nil, err
	}
	return jobs, []stmt{c.update(jobs)}, nil
}

// update is the UPDATE that leases jobs, read by the claim's locking read.
func (c *claimQuery) update(jobs []*leasetype.JobRow) stmt {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return c.lease.update(c.owner, jobs[0].LeasedAt, ids)
}

// claimLease is the lease a claim grants, as SQL: the per-kind TTLs and the
// stuck kinds of a JobClaimParams.
type claimLease struct {
	ttlExpr, stuckExpr string // for claimTTLFormat and claimPolicyFormat
	ttlArgs, stuckArgs []any
	defaultTTLMicros   int64
}

// newClaimLease builds the lease expressions of params.
func newClaimLease(params *driver.JobClaimParams) *claimLease {
	l := &claimLease{ttlExpr: "NULL", stuckExpr: "FALSE", defaultTTLMicros: params.DefaultLeaseTTL.Microseconds()}
	kinds := make([]string, 0, len(params.KindLeaseTTL))
	for kind := range params.KindLeaseTTL {
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	if len(kinds) > 0 {
		var b strings.Builder
		b.WriteString("CASE kind")
		for _, kind := range kinds {
			b.WriteString(" WHEN ? THEN ?")
			l.ttlArgs = append(l.ttlArgs, kind, params.KindLeaseTTL[kind].Microseconds())
		}
		b.WriteString(" END")
		l.ttlExpr = b.String()
	}
	if len(params.StuckKinds) > 0 {
		l.stuckExpr = "kind IN (" + placeholders(len(params.StuckKinds)) + ")"
		for _, kind := range params.StuckKinds {
			l.stuckArgs = append(l.stuckArgs, kind)
		}
	}
	return l
}

// exprArgs are the arguments of claimTTLFormat and claimPolicyFormat, in
// that order.
func (l *claimLease) exprArgs() []any {
	args := make([]any, 0, len(l.ttlArgs)+1+len(l.stuckArgs))
	args = append(args, l.ttlArgs...)
	args = append(args, l.defaultTTLMicros)
	return append(args, l.stuckArgs...)
}

// update is the UPDATE that leases ids to owner from now.
func (l *claimLease) update(owner string, now *time.Time, ids []int64) stmt {
	at := timeArg(now)
	args := make([]any, 0, 3+len(l.ttlArgs)+1+len(l.stuckArgs))
	args = append(args, owner, at, at)
	args = append(args, l.exprArgs()...)
	return stmt{query: fmt.Sprintf(jobClaimUpdateSQLFormat, l.ttlExpr, l.stuckExpr, idList(ids)), args: args}
}

// idList writes IDs as the literal list of an IN (...): numbers need no
// quoting, and a list of hundreds costs no placeholders to interpolate nor
// arguments to box.
func idList(ids []int64) string {
	b := make([]byte, 0, 8*len(ids))
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return string(b)
}

// scanClaimed reads the result set of a claim's locking read
// (jobClaimPickSQLFormat), without closing rows, and returns its jobs in
// claim order as the claim's UPDATE leaves them, leased to owner. Every
// row carries the same database clock.
func scanClaimed(rows *sql.Rows, owner string) ([]*leasetype.JobRow, error) {
	var (
		jobs       []*leasetype.JobRow
		now, until dbTime
		policy     text
	)
	s := newJobScan([]any{&now, &until, &policy}, true)
	policy.names = s.names
	for rows.Next() {
		if err := s.read(rows); err != nil {
			return nil, err
		}
		s.state.s = string(leasetype.JobStateRunning)
		s.attempt++
		s.leaseToken++
		s.leaseOwner.s = owner
		s.leasedAt, s.leaseUntil = now, until
		s.heartbeatAt, s.heartbeats = dbTime{}, 0
		s.expiryPolicy.s = policy.s
		jobs = append(jobs, s.row())
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return jobs, nil
}

// claimKindFilter returns the SQL that restricts a claim to kinds (when not
// empty) and away from exclude, and its arguments; "" for a plain claim.
func claimKindFilter(kinds, exclude []string) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	for _, f := range []struct {
		sql   string
		kinds []string
	}{{" AND kind IN (", kinds}, {" AND kind NOT IN (", exclude}} {
		if len(f.kinds) == 0 {
			continue
		}
		b.WriteString(f.sql + placeholders(len(f.kinds)) + ")")
		for _, k := range f.kinds {
			args = append(args, k)
		}
	}
	return b.String(), args
}

// exists runs a query of one row or none on the executor's querier.
func (e *executor) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := e.q.QueryRowContext(ctx, query, args...).Scan(&one)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// pick runs a locking read of (id, database clock) rows and returns the IDs,
// without repeats, and the clock as a statement argument.
func pick(ctx context.Context, q querier, query string, args ...any) ([]int64, any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		ids  []int64
		now  dbTime
		seen = map[int64]bool{}
	)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &now); err != nil {
			return nil, nil, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return ids, timeArg(&now.Time), nil
}

// leaseRenewal is the JSON form of a driver.LeaseRenewal for jsonLeases.
type leaseRenewal struct {
	ID    int64 `json:"id"`
	Token int64 `json:"token"`
	TTLUS int64 `json:"ttl_us"`
}

// JobHeartbeat renews leases in one transaction whatever the batch size: a
// locking read of the leases still held, then one UPDATE ... JOIN JSON_TABLE
// of exactly those, sent with the COMMIT in one of the driver's own
// transactions (connTx): two round trips.
func (e *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error) {
	if len(params.Leases) == 0 {
		return []int64{}, nil
	}
	leases := make([]leaseRenewal, len(params.Leases))
	for i, l := range params.Leases {
		leases[i] = leaseRenewal{ID: l.ID, Token: l.Token, TTLUS: l.TTL.Microseconds()}
	}
	leasesJSON, err := json.Marshal(leases)
	if err != nil {
		return nil, fmt.Errorf("renew leases: encode: %w", err)
	}
	var renewed []int64
	err = e.writeEnd(ctx, func(q querier) ([]stmt, error) {
		ids, now, err := pick(ctx, q, jobHeartbeatPickSQL, string(leasesJSON), params.Owner)
		if err != nil || len(ids) == 0 {
			renewed = nil
			return nil, err
		}
		// As many IDs as leases: every lease is held, each once.
		heldJSON := leasesJSON
		if len(ids) < len(leases) {
			held := keep(leases, ids, func(l leaseRenewal) int64 { return l.ID })
			if heldJSON, err = json.Marshal(held); err != nil {
				return nil, err
			}
		}
		renewed = ids
		return []stmt{{query: jobHeartbeatSQL, args: []any{string(heldJSON), now, now}}}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	if renewed == nil {
		renewed = []int64{}
	}
	slices.Sort(renewed)
	return renewed, nil
}

// keep returns the items whose ID is in ids, the first item of each ID only.
func keep[T any](items []T, ids []int64, id func(T) int64) []T {
	want := make(map[int64]bool, len(ids))
	for _, i := range ids {
		want[i] = true
	}
	out := make([]T, 0, len(ids))
	for _, it := range items {
		if want[id(it)] {
			out = append(out, it)
			delete(want, id(it))
		}
	}
	return out
}

// finishItem is the JSON form of a driver.JobFinish for jsonFinish. Absent
// keys read as NULL.
type finishItem struct {
	ID          int64   `json:"id"`
	Token       int64   `json:"token"`
	State       string  `json:"state"`
	Outcome     string  `json:"outcome"`
	CountError  int     `json:"count_error"`
	Error       *string `json:"error,omitempty"`
	ScheduledAt any     `json:"scheduled_at,omitempty"`
}

// finishStates are the states a lease may end in.
var finishStates = []leasetype.JobState{
	leasetype.JobStateCompleted, leasetype.JobStateRetryable, leasetype.JobStateDiscarded,
	leasetype.JobStateCancelled, leasetype.JobStateAvailable, leasetype.JobStateScheduled,
}

// JobFinish ignores params.TxBound. MySQL has no idle-in-transaction
// timeout, and the session variables that come near (MariaDB's
// idle_transaction_timeout, wait_timeout) last for the session, past the
// caller's transaction, on a pooled connection the driver does not
// control. A caller's transaction that holds a completion holds the job's
// row lock until it ends: the expirer skips the locked row, and no other
// holder can write it.
//
// JobFinish ends the leases of params.Items in one transaction of three
// statements whatever the batch size: a locking read of the leases still
// held, one INSERT ... SELECT of their attempt rows and one UPDATE ... JOIN
// JSON_TABLE of their jobs. In one of the driver's own transactions that is
// two round trips: the locking read begins the transaction, and the INSERT,
// the UPDATE and the COMMIT go together (connTx). The locking read also
// tells which jobs have dependents; only for those do the dependency rules
// (propagateDependencies) run, before the commit. It returns the IDs
// written in input order.
//
// A batch of plain completions in one of the driver's own transactions
// first goes without the locking read (completeHeld): a fenced UPDATE of
// the jobs without dependents, and their attempt rows only when it wrote
// every item, still two round trips (that one, then the COMMIT) but one
// statement less for the server. When a lease of the batch is lost or a
// job has dependents, that round trip is rolled back and the batch takes
// the locking path above.
func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	items, err := finishItems(params)
	if err != nil || len(items) == 0 {
		return []int64{}, err
	}
	refs := leaseRefsJSON(items)
	var written []int64
	err = e.writeEnd(ctx, func(q querier) ([]stmt, error) {
		var (
			end []stmt
			err error
		)
		if tx, ok := q.(*connTx); ok && allPlain(items) {
			done, rows, err := completeHeld(ctx, tx, items, refs, params.Owner, nil)
			if err != nil || done {
				written = finishIDs(items)
				return nil, errors.Join(err, closeRows(rows))
			}
		}
		written, end, err = finishHeld(ctx, q, items, refs, params.Owner)
		return end, err
	})
	if err != nil {
		return nil, fmt.Errorf("finish leases: %w", err)
	}
	return written, nil
}

// allPlain tells whether every item is a plain completion.
func allPlain(items []*driver.JobFinish) bool {
	for _, it := range items {
		if !plainCompletion(it) {
			return false
		}
	}
	return true
}

// finishIDs returns the IDs of items, in their order.
func finishIDs(items []*driver.JobFinish) []int64 {
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// completeHeld completes items, plain completions of distinct jobs, in tx
// without a locking read, when the leases are all still held by owner and
// none of the jobs has dependents: the batch of almost every outcome
// flush. In one round trip it sends jobCompleteHeldSQL, then
// attemptInsertCompletedAllSQLFormat, which writes the attempt rows only
// when that UPDATE wrote every item, then rowCountSQL, then next when set
// (a claim's locking read, which so reads after the completions). When
// the count says every item was written it returns true and, with next,
// the rows positioned at next's result set, for the caller to close.
// Otherwise (a lease lost, a job with dependents) it rolls back what the
// round trip wrote, claim locks included, and returns false: tx begins
// again with its next statement, for the locking path (finishHeld), which
// writes what is still held and runs the dependency rules.
func completeHeld(ctx context.Context, tx *connTx, items []*driver.JobFinish, refs, owner string, next *stmt) (bool, *sql.Rows, error) {
	stmts := []stmt{
		{query: jobCompleteHeldSQL, args: []any{refs, owner}},
		{query: fmt.Sprintf(attemptInsertCompletedAllSQLFormat, idList(finishIDs(items)), len(items))},
		{query: rowCountSQL},
	}
	if next != nil {
		stmts = append(stmts, *next)
	}
	query, args := joinStmts(stmts)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return false, nil, err
	}
	var written int64
	if !rows.Next() {
		err := rows.Err()
		rows.Close()
		if err == nil {
			err = errors.New("no row count after the completions")
		}
		return false, nil, err
	}
	if err := rows.Scan(int64Into{&written}); err != nil {
		rows.Close()
		return false, nil, err
	}
	if written != int64(len(items)) {
		if err := closeRows(rows); err != nil {
			return false, nil, err
		}
		return false, nil, tx.restart(ctx)
	}
	if next == nil {
		return true, nil, closeRows(rows)
	}
	if !rows.NextResultSet() {
		err := rows.Err()
		rows.Close()
		if err == nil {
			err = errors.New("no result set for the claim's locking read")
		}
		return false, nil, err
	}
	return true, rows, nil
}

// closeRows closes rows, when set, and returns what went wrong reading
// them, the statements after them included.
func closeRows(rows *sql.Rows) error {
	if rows == nil {
		return nil
	}
	for rows.NextResultSet() {
	}
	err := rows.Err()
	return errors.Join(err, rows.Close())
}

// finishItems checks the states of params.Items and returns the items to
// write: an ID given twice can be written at most once, by its first item.
func finishItems(params *driver.JobFinishParams) ([]*driver.JobFinish, error) {
	items := make([]*driver.JobFinish, 0, len(params.Items))
	seen := make(map[int64]bool, len(params.Items))
	for _, it := range params.Items {
		if !slices.Contains(finishStates, it.State) {
			return nil, fmt.Errorf("finish leases: job %d: cannot end a lease in state %q", it.ID, it.State)
		}
		if seen[it.ID] {
			continue
		}
		seen[it.ID] = true
		items = append(items, it)
	}
	return items, nil
}

// finishHeld ends, in q, the leases of items (their leaseRefsJSON is refs)
// that owner still holds. It runs the locking read and returns the IDs it
// ends, in input order, and the statements that end them, for the caller
// to send after it, in the same transaction (with the COMMIT, or in front
// of a claim). When some of the jobs have dependents it runs those
// statements itself, then the dependency rules (propagateDependencies),
// and returns none.
func finishHeld(ctx context.Context, q querier, items []*driver.JobFinish, refs, owner string) ([]int64, []stmt, error) {
	written := []int64{}
	ids, parents, now, err := pickFinish(ctx, q, refs, owner)
	if err != nil || len(ids) == 0 {
		return written, nil, err
	}
	held := items
	if len(ids) < len(items) {
		held = keep(items, ids, func(f *driver.JobFinish) int64 { return f.ID })
	}
	end, err := finishStmts(held, now)
	if err != nil {
		return nil, nil, err
	}
	for _, it := range held {
		written = append(written, it.ID)
	}
	if len(parents) == 0 {
		return written, end, nil
	}
	if err := execEach(ctx, q, end); err != nil {
		return nil, nil, err
	}
	if err := propagateDependencies(ctx, q, parents, running); err != nil {
		return nil, nil, err
	}
	return written, nil, nil
}

var _ driver.FinishClaimer = (*executor)(nil)

// JobFinishAndClaim is JobFinish(finish) then JobClaim(claim) in one of
// the driver's own transactions: both take effect or neither does. Each
// keeps its own guarantees (fencing by token and owner, attempt rows,
// lease_until on the database clock, the claim's kind filters and lease
// TTLs). In a connTx it is three round trips whatever the batch sizes,
// where the two calls cost five: the finish's locking read begins the
// transaction, the finish's INSERT and UPDATE go with the claim's locking
// read, and the claim's UPDATE with the COMMIT. The claim skips JobClaim's
// exists read, which only spares an empty queue a transaction. The claim
// reads after the finish's writes, as it would after JobFinish: a job the
// finish makes claimable at once (released, retried without delay) may be
// claimed again. When a finished job has dependents, its statements and
// the dependency rules run before the claim's locking read, each in a
// round trip of its own. A batch of plain completions whose leases are all
// held and whose jobs have no dependents takes two round trips instead of
// three: its fenced UPDATE, its attempt rows and the claim's locking read
// begin the transaction, and the claim's UPDATE goes with the COMMIT
// (completeHeld, as in JobFinish; any other batch of completions loses
// that first round trip, rolled back, and takes the three). In a caller's transaction, with no items or with
// claim.Max < 1, JobFinish and JobClaim run one after the other.
func (e *executor) JobFinishAndClaim(ctx context.Context, finish *driver.JobFinishParams, claim *driver.JobClaimParams) ([]int64, []*leasetype.JobRow, error) {
	if !e.onPool || len(finish.Items) == 0 || claim.Max < 1 {
		written, err := e.JobFinish(ctx, finish)
		if err != nil {
			return nil, nil, err
		}
		jobs, err := e.JobClaim(ctx, claim)
		return written, jobs, err
	}
	items, err := finishItems(finish)
	if err != nil {
		return nil, nil, err
	}
	refs := leaseRefsJSON(items)
	c := newClaimQuery(claim)
	var (
		written []int64
		jobs    []*leasetype.JobRow
	)
	err = e.writeEnd(ctx, func(q querier) ([]stmt, error) {
		var (
			end []stmt
			err error
		)
		if tx, ok := q.(*connTx); ok && allPlain(items) {
			done, rows, err := completeHeld(ctx, tx, items, refs, finish.Owner, &c.pick)
			if err != nil {
				return nil, err
			}
			if done {
				defer rows.Close()
				written = finishIDs(items)
				if jobs, err = scanClaimed(rows, c.owner); err != nil || len(jobs) == 0 {
					return nil, err
				}
				return []stmt{c.update(jobs)}, nil
			}
		}
		if written, end, err = finishHeld(ctx, q, items, refs, finish.Owner); err != nil {
			return nil, err
		}
		jobs, end, err = c.run(ctx, q, end)
		return end, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("finish leases and claim jobs: %w", err)
	}
	if jobs == nil {
		jobs = []*leasetype.JobRow{}
	}
	return written, jobs, nil
}

var _ driver.AttemptsClaimer = (*executor)(nil)

// JobAttemptsAndClaim is JobAttempts(attempts), which names Leases, then
// JobClaim(claim) in one of the driver's own transactions. In a connTx it
// is two round trips, where the two calls cost four: the read of the
// attempt rows and the claim's locking read go together and begin the
// transaction, the claim's UPDATE goes with the COMMIT. The read locks
// nothing and returns what JobAttempts would at that moment. The claim
// skips JobClaim's exists read, as in JobFinishAndClaim. In a caller's
// transaction, with no leases or with claim.Max < 1, JobAttempts and
// JobClaim run one after the other.
func (e *executor) JobAttemptsAndClaim(ctx context.Context, attempts *driver.JobAttemptsParams, claim *driver.JobClaimParams) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	if !e.onPool || len(attempts.Leases) == 0 || claim.Max < 1 {
		found, err := e.JobAttempts(ctx, attempts)
		if err != nil {
			return nil, nil, err
		}
		jobs, err := e.JobClaim(ctx, claim)
		return found, jobs, err
	}
	if err := driver.ValidateJobAttempts(attempts); err != nil {
		return nil, nil, err
	}
	read := attemptsOfLeases(attempts.Leases)
	c := newClaimQuery(claim)
	var (
		found []*leasetype.AttemptRow
		jobs  []*leasetype.JobRow
	)
	err := e.writeEnd(ctx, func(q querier) ([]stmt, error) {
		var (
			last []stmt
			err  error
		)
		if _, ok := q.(*connTx); !ok {
			if found, err = sqlbackend.QueryAll(ctx, q, scanAttempt, read.query, read.args...); err != nil {
				return nil, err
			}
			jobs, last, err = c.run(ctx, q, nil)
			return last, err
		}
		found, jobs, err = readAttemptsAndPick(ctx, q, read, c)
		if err != nil || len(jobs) == 0 {
			return nil, err
		}
		return []stmt{c.update(jobs)}, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read attempts and claim jobs: %w", err)
	}
	if jobs == nil {
		jobs = []*leasetype.JobRow{}
	}
	return found, jobs, nil
}

// readAttemptsAndPick sends read and the claim's locking read in one round
// trip, and returns the attempt rows and the claimed jobs, as the claim's
// UPDATE leaves them.
func readAttemptsAndPick(ctx context.Context, q querier, read stmt, c *claimQuery) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	query, args := joinStmts([]stmt{read, c.pick})
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	found := []*leasetype.AttemptRow{}
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, nil, err
		}
		found = append(found, a)
	}
	if !rows.NextResultSet() {
		if err := rows.Err(); err != nil {
			return nil, nil, err
		}
		return nil, nil, errors.New("no result set for the claim's locking read")
	}
	jobs, err := scanClaimed(rows, c.owner)
	if err != nil {
		return nil, nil, err
	}
	return found, jobs, nil
}

// plainCompletion tells whether it completes with no error and nothing
// else: the outcome of almost every job, which attemptInsertCompletedSQLFormat
// and jobCompleteSQLFormat write by ID, without an item to read.
func plainCompletion(it *driver.JobFinish) bool {
	return it.State == leasetype.JobStateCompleted && it.Outcome == leasetype.OutcomeCompleted &&
		it.Error == "" && !it.CountError && it.ScheduledAt == nil
}

// finishStmts returns the statements that end the leases of held (locked
// by the pick) at now: the attempt rows first, then the jobs; plain
// completions by ID, the other items through jsonFinish.
func finishStmts(held []*driver.JobFinish, now any) ([]stmt, error) {
	var completed []int64
	var other []finishItem
	for _, it := range held {
		if plainCompletion(it) {
			completed = append(completed, it.ID)
			continue
		}
		fi := finishItem{ID: it.ID, Token: it.Token, State: string(it.State), Outcome: string(it.Outcome)}
		if it.CountError {
			fi.CountError = 1
		}
		if it.Error != "" {
			fi.Error = &it.Error
		}
		if it.ScheduledAt != nil {
			fi.ScheduledAt = timeArg(it.ScheduledAt)
		}
		other = append(other, fi)
	}
	var out []stmt
	if len(completed) > 0 {
		list := idList(completed)
		out = append(out,
			stmt{query: fmt.Sprintf(attemptInsertCompletedSQLFormat, list), args: []any{now}},
			stmt{query: fmt.Sprintf(jobCompleteSQLFormat, list), args: []any{now}})
	}
	if len(other) > 0 {
		otherJSON, err := json.Marshal(other)
		if err != nil {
			return nil, fmt.Errorf("encode: %w", err)
		}
		out = append(out,
			stmt{query: attemptInsertFinishedSQL, args: []any{now, string(otherJSON)}},
			stmt{query: jobFinishSQL, args: []any{string(otherJSON), now, now, now}})
	}
	return out, nil
}

// leaseRefsJSON encodes the leases of items for jsonLeaseRefs.
func leaseRefsJSON(items []*driver.JobFinish) string {
	b := make([]byte, 0, 24*len(items)+2)
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, it.ID, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, it.Token, 10)
		b = append(b, ']')
	}
	return string(append(b, ']'))
}

// pickFinish runs jobFinishPickSQL and returns the IDs it locked, those of
// them that have dependents, and the database clock as a statement argument.
func pickFinish(ctx context.Context, q querier, refs, owner string) (ids, parents []int64, now any, err error) {
	rows, err := q.QueryContext(ctx, jobFinishPickSQL, refs, owner)
	if err != nil {
		return nil, nil, nil, err
	}
	defer rows.Close()
	var at dbTime
	for rows.Next() {
		var (
			id            int64
			hasDependents bool
		)
		if err := rows.Scan(&id, &at, &hasDependents); err != nil {
			return nil, nil, nil, err
		}
		ids = append(ids, id)
		if hasDependents {
			parents = append(parents, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, err
	}
	return ids, parents, timeArg(&at.Time), nil
}

// expireCandidates lists running jobs whose lease expired, locking nothing:
// those params asks for, at most limit.
func (e *executor) expireCandidates(ctx context.Context, params *driver.JobExpireParams, limit int) ([]int64, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	query, args := jobExpireCandidatesSQL, []any{limit}
	if params.Queue != "" || len(params.Kinds) > 0 {
		// IN () is not SQL: an empty kind list is the one kind "", which
		// no job has.
		kinds := append([]string{}, params.Kinds...)
		if len(kinds) == 0 {
			kinds = []string{""}
		}
		query = fmt.Sprintf(jobExpireCandidatesOfSQLFormat, placeholders(len(kinds)))
		args = []any{params.Queue}
		for _, k := range kinds {
			args = append(args, k)
		}
		args = append(args, limit)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlbackend.ScanIDs(rows)
}

// defaultExpireLimit is JobExpire's limit when the caller sets none.
const defaultExpireLimit = 1000

// JobExpire reclaims expired leases in one transaction: a SELECT ... FOR
// UPDATE SKIP LOCKED of the expired jobs (so concurrent watchers never
// reclaim one twice), one UPDATE of those rows, one INSERT ... SELECT of their
// attempt rows, and a read of the rows.
func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = defaultExpireLimit
	}
	candidates, err := e.expireCandidates(ctx, params, limit)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	jobs := []*leasetype.JobRow{}
	if len(candidates) == 0 {
		return jobs, nil
	}
	err = e.write(ctx, func(q querier) error {
		jobs = []*leasetype.JobRow{}
		ids, now, err := pick(ctx, q, fmt.Sprintf(jobExpirePickSQL, placeholders(len(candidates))), idArgs(candidates)...)
		if err != nil || len(ids) == 0 {
			return err
		}
		m := params.MaxExpiries
		args := append([]any{m, m, m, m, now, m, m, now}, idArgs(ids)...)
		if _, err := q.ExecContext(ctx, fmt.Sprintf(jobExpireSQLFormat, placeholders(len(ids))), args...); err != nil {
			return err
		}
		args = append([]any{now}, idArgs(ids)...)
		if _, err := q.ExecContext(ctx, fmt.Sprintf(jobAttemptInsertExpiredSQLFormat, placeholders(len(ids))), args...); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		if err := propagateDependencies(ctx, q, ids, running); err != nil {
			return fmt.Errorf("propagate to dependents: %w", err)
		}
		byID, err := jobsByID(ctx, q, ids)
		if err != nil {
			return fmt.Errorf("read expired jobs: %w", err)
		}
		for _, j := range byID {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}
