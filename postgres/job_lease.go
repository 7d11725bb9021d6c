package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// jobClaimSQL leases up to $2 jobs of queue $1. The picked CTE is
// materialized so that LIMIT and SKIP LOCKED apply once, before the update;
// concurrent claimers skip each other's rows instead of waiting on them.
//
// The update finds the locked rows by their tuple address (ctid) instead of
// by id, which would descend the primary key for every row: one TID scan of
// the whole list (ctid = ANY), not one per row, as a join on ctid would run
// (each TID scan asks the kernel for the table's size, an lseek, which
// waits on the file's lock while other backends extend or write it: the
// rescan per row cost the drain about 8 µs of server CPU per job, a fifth
// of it). The update's rows come back in address order; the driver
// sorts them into claim order. The address cannot change between the lock and
// the update: the row stays locked by this statement. A row that another
// transaction updated and committed after this statement's snapshot was
// taken is locked in its newer version, which the update does not see; it
// is left unclaimed, as if another claimer had taken it, and stays
// claimable. The row is never claimed twice: the update writes only rows
// this statement locked.
// The TTL is the job's own, else the per-kind TTL from the parallel arrays
// $4/$5, else $6, all in milliseconds. Kinds in $7 get the stuck policy.
// A paused queue (a leasehold_queue row with paused_at set) yields nothing.
// $8 (when not empty) restricts the claim to those kinds and $9 excludes
// kinds. Both are filters on rows the claim index already yields, and both
// are always true for empty arrays, so the plain claim keeps its plan and
// pays a constant test per row at most.
//
// The scan starts after the position ($10, $11, $12) in claim order: the
// last job of the producer's previous full claim, or (0, -infinity, 0) for
// the head. The index's head holds the entries of the jobs already claimed
// until vacuum removes them, and a drain that always starts there walks
// more of them with every claim.
const jobClaimSQL = `
WITH picked AS MATERIALIZED (
	SELECT ctid AS picked_ctid
	FROM leasehold_job
	WHERE state IN ('available', 'scheduled', 'retryable')
		AND queue = $1
		AND scheduled_at <= now()
		AND (cardinality($8::text[]) = 0 OR kind = ANY($8::text[]))
		AND kind <> ALL($9::text[])
		AND NOT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = $1 AND q.paused_at IS NOT NULL)
		AND (priority, scheduled_at, id) > ($10::smallint, $11::timestamptz, $12::bigint)
	ORDER BY priority, scheduled_at, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED
)
` + jobLeaseSetSQL + `WHERE ctid = ANY(ARRAY(SELECT picked_ctid FROM picked))
RETURNING ` + jobColumns

// jobLeaseSetSQL is what every claim writes to the rows it picked: the
// fast claim and the keyed claim (job_keyed.go) share it, owner $3, TTLs by
// kind $4/$5, default TTL $6 (ms), stuck-policy kinds $7. The TTL lookup
// by kind is a subquery run per row, which the CASE skips when no kind has a
// TTL of its own.
const jobLeaseSetSQL = `
UPDATE leasehold_job SET
	state = 'running',
	attempt = attempt + 1,
	lease_token = lease_token + 1,
	lease_owner = $3,
	leased_at = now(),
	lease_until = now() + coalesce(
		lease_ttl_ms,
		CASE WHEN cardinality($4::text[]) > 0 THEN
			(SELECT k.ttl_ms FROM unnest($4::text[], $5::bigint[]) AS k(ttl_kind, ttl_ms)
			 WHERE k.ttl_kind = leasehold_job.kind LIMIT 1) END,
		$6::bigint) * interval '1 millisecond',
	heartbeat_at = NULL,
	heartbeats = 0,
	expiry_policy = CASE WHEN kind = ANY($7::text[]) THEN 'stuck' ELSE 'retry' END
`

// jobHeartbeatSQL renews the leases given as parallel arrays of id, token
// and TTL in milliseconds, held by lease owner $4. It writes only unindexed
// columns (lease_owner is only read), so Postgres can
// apply it as a HOT update. The clock is read once (a materialized CTE) so
// that heartbeat_at and lease_until agree.
//
// The range of the ids (here and in the outcome statements) bounds any scan
// of the running index to the batch's ids: the index's head holds the
// entries of jobs that have left running state until vacuum removes them,
// and a plan that scans the whole index (a hash of the running rows, which
// the planner picks when its statistics show few running jobs) would walk
// them on every statement (TestOutcomePlansBoundTheRunningScan).
const jobHeartbeatSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS hb_now)
UPDATE leasehold_job SET
	lease_until = clock.hb_now + t.hb_ttl_ms * interval '1 millisecond',
	heartbeat_at = clock.hb_now,
	heartbeats = heartbeats + 1
FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS t(hb_id, hb_token, hb_ttl_ms), clock
WHERE id = t.hb_id
	AND lease_token = t.hb_token
	AND lease_owner = $4
	AND state = 'running'
	AND lease_until > clock.hb_now
	AND id BETWEEN (SELECT min(b) FROM unnest($1::bigint[]) AS b)
		AND (SELECT max(b) FROM unnest($1::bigint[]) AS b)
RETURNING id`

// attemptInsert starts the insert of the attempt rows of ended leases: the
// lease's columns, which the job row holds (leaseColumns, in this order),
// then finished_at, outcome and error. A lease that completes its job gets
// no row: the job's row holds it, marked completion_in_row, and the
// leasehold_attempt view presents it (migration 12, whose triggers copy it
// here before the row changes or goes).
const attemptInsert = `INSERT INTO leasehold_attempt_log (job_id, attempt, token, owner, leased_at, lease_until,
	last_heartbeat_at, heartbeats, finished_at, outcome, error)`

// leaseColumns are the job row's columns of its lease, in the order of
// attemptInsert's first columns.
const leaseColumns = `id, attempt, lease_token, lease_owner, leased_at, lease_until, heartbeat_at, heartbeats`

// jobFinishSQL ends the leases given as parallel arrays, held by lease
// owner $8, and appends the attempt rows of those that did not complete
// their job in the same statement. It reads clock_timestamp(), not now():
// it may run late in a long user transaction (CompleteTx), where now() is the
// transaction's start and would accept a lease that has since expired.
//
// A job whose cancellation was asked for (cancel_requested_at set) must not
// run again: an outcome that would run it again (retryable, available,
// scheduled) becomes cancelled, with attempt outcome cancelled. The test
// reads the row the update locked, so a cancellation that commits first is
// always seen (READ COMMITTED re-evaluates the row after the lock wait).
const jobFinishSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now),
input AS (
	SELECT *
	FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[],
	            $5::timestamptz[], $6::text[], $7::boolean[])
		AS t(fin_id, fin_token, fin_state, fin_outcome, fin_scheduled_at, fin_error, fin_count_error)
),
finished AS (
	UPDATE leasehold_job SET
		state = CASE
			WHEN cancel_requested_at IS NOT NULL
				AND input.fin_state IN ('retryable', 'available', 'scheduled') THEN 'cancelled'
			ELSE input.fin_state END,
		scheduled_at = CASE
			WHEN cancel_requested_at IS NOT NULL
				AND input.fin_state IN ('retryable', 'available', 'scheduled') THEN scheduled_at
			WHEN input.fin_state IN ('retryable', 'scheduled') THEN coalesce(input.fin_scheduled_at, clock.fin_now)
			WHEN input.fin_state = 'available' THEN clock.fin_now
			ELSE scheduled_at END,
		errors = errors + CASE WHEN input.fin_count_error THEN 1 ELSE 0 END,
		last_error = CASE WHEN input.fin_error <> '' THEN input.fin_error ELSE last_error END,
		finalized_at = CASE
			WHEN input.fin_state IN ('completed', 'discarded', 'cancelled', 'stuck') THEN clock.fin_now
			WHEN cancel_requested_at IS NOT NULL THEN clock.fin_now
			END,
		completion_in_row = input.fin_state = 'completed' AND input.fin_outcome = 'completed'
	FROM input, clock
	WHERE id = input.fin_id
		AND lease_token = input.fin_token
		AND lease_owner = $8
		AND state = 'running'
		AND lease_until > clock.fin_now
		AND id BETWEEN (SELECT min(b) FROM unnest($1::bigint[]) AS b)
			AND (SELECT max(b) FROM unnest($1::bigint[]) AS b)
	RETURNING ` + leaseColumns + `, clock.fin_now,
		-- state is the new value here: cancelled by the request above.
		CASE WHEN state = 'cancelled' AND input.fin_state <> 'cancelled' THEN 'cancelled'
			ELSE input.fin_outcome END AS fin_outcome,
		input.fin_error, completion_in_row
),
recorded AS (
	` + attemptInsert + `
	SELECT ` + leaseColumns + `, fin_now, fin_outcome, nullif(fin_error, '')
	FROM finished
	WHERE NOT completion_in_row
)
SELECT id FROM finished`

// jobCompleteSQL is jobFinishSQL for the success path: completions only,
// given as parallel arrays of id and token, held by lease owner $3, no error
// text. It writes what
// jobFinishSQL writes for them (a cancellation request does not change a
// completion) and leaves Postgres four text arrays fewer to decode.
const jobCompleteSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now),
finished AS (
	UPDATE leasehold_job SET
		state = 'completed',
		finalized_at = clock.fin_now,
		completion_in_row = true
	FROM unnest($1::bigint[], $2::bigint[]) AS t(fin_id, fin_token), clock
	WHERE id = t.fin_id
		AND lease_token = t.fin_token
		AND lease_owner = $3
		AND state = 'running'
		AND lease_until > clock.fin_now
		AND id BETWEEN (SELECT min(b) FROM unnest($1::bigint[]) AS b)
			AND (SELECT max(b) FROM unnest($1::bigint[]) AS b)
	RETURNING id
)
SELECT id FROM finished`

// jobCompleteOneSQL is jobCompleteSQL for one lease, given as scalars: id
// $1, token $2, owner $3. It writes what jobCompleteSQL writes for a batch
// of one. A handler's CompleteTx completes one job per call, in its own
// transaction; an idle client's completer sends batches of one too. For
// those, the batch form is mostly setup: the server builds its arrays'
// function scans and the ids' range; here the update finds the row by its
// primary key. It is a plain UPDATE: its clock is statement_timestamp(),
// the time the server read the statement, one reading for the whole
// statement, taken before the update waits for any row, as the batch
// forms' materialized clock is; that CTE, scanned and joined for one row,
// cost a call 6–12 µs more of server CPU in 5 runs of 6
// (BenchmarkCompleteOne's forms unbounded and clock-cte-unbounded).
//
// Both write the job row alone: it holds the completing lease, marked
// completion_in_row, which the leasehold_attempt view presents as its
// attempt (migration 12).
const jobCompleteOneSQL = `
UPDATE leasehold_job SET
	state = 'completed',
	finalized_at = statement_timestamp(),
	completion_in_row = true
WHERE id = $1
	AND lease_token = $2
	AND lease_owner = $3
	AND state = 'running'
	AND lease_until > statement_timestamp()
RETURNING id`

// jobExpireSQL reclaims up to $1 running jobs whose lease expired; with $3
// or $4 set, only those of queue $3 or of a kind in $4. Locking
// with SKIP LOCKED in a materialized CTE lets many watchers run at once
// without reclaiming a job twice. A job goes to stuck when its policy says so
// or when it reaches $2 expiries ($2 > 0); stuck counts as finalized. A job
// whose cancellation was asked for is cancelled instead: it must not run
// again. Its attempt row still says lease_expired, which is what happened.
const jobExpireSQL = `
WITH picked AS MATERIALIZED (
	SELECT id AS picked_id,
		expiry_policy = 'stuck' OR ($2::int > 0 AND expiries + 1 >= $2::int) AS to_stuck
	FROM leasehold_job
	WHERE state = 'running' AND lease_until < now()
		AND ($3::text = '' AND cardinality($4::text[]) = 0 OR queue = $3 OR kind = ANY($4::text[]))
	ORDER BY id
	LIMIT $1
	FOR UPDATE SKIP LOCKED
),
expired AS (
	UPDATE leasehold_job SET
		expiries = expiries + 1,
		state = CASE
			WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
			WHEN picked.to_stuck THEN 'stuck'
			ELSE 'available' END,
		scheduled_at = CASE
			WHEN cancel_requested_at IS NOT NULL OR picked.to_stuck THEN scheduled_at
			ELSE now() END,
		finalized_at = CASE WHEN cancel_requested_at IS NOT NULL OR picked.to_stuck THEN now() END,
		last_error = format('lease expired: owner %s, token %s, lease until %s',
			lease_owner, lease_token,
			to_char(lease_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
	FROM picked
	WHERE id = picked.picked_id
	RETURNING leasehold_job.*
),
recorded AS (
	` + attemptInsert + `
	SELECT ` + leaseColumns + `, now(), 'lease_expired', last_error
	FROM expired
)
SELECT ` + jobColumns + ` FROM expired ORDER BY id`

// jobClaimPlanSQL, sent just before jobClaimSQL in the same implicit
// transaction (one batch), makes the server plan the claim once per
// connection instead of once per call: a generic plan of the prepared
// statement (plan_cache_mode), which with sorting ruled out (enable_sort)
// is the ordered scan of the claim index that every custom plan is. Both
// settings are local to the transaction (set_config's is_local), which ends
// with the batch.
//
// Without it the server plans the claim anew on every call: the generic
// plan of a LIMIT given as a parameter assumes a tenth of the backlog is
// wanted and sorts it, so the custom plans stay cheaper. Planning cost
// about a third of the claim's server time in small claims (payments, a
// steady trickle of jobs): 1,000 claims of 25 jobs spent 0.8 s planning
// against 1.6 s executing (pg_stat_statements with track_planning).
const jobClaimPlanSQL = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_sort', 'off', true)`

// queueClaim queues the claim of params on b, after jobClaimPlanSQL.
func queueClaim(b *pgx.Batch, params *driver.JobClaimParams) {
	b.Queue(jobClaimPlanSQL)
	b.Queue(jobClaimSQL, claimArgs(params)...)
}

// JobClaim sends jobClaimPlanSQL and jobClaimSQL as one batch: one round
// trip, one implicit transaction. Inside a caller's transaction it sends the
// claim alone, which leaves the caller's later statements planned as the
// caller's settings say.
func (e *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	if params.Max < 1 {
		return nil, nil
	}
	if _, inTx := e.db.(pgx.Tx); inTx {
		rows, err := e.db.Query(ctx, jobClaimSQL, claimArgs(params)...)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: %w", translateError(err))
		}
		return scanClaimed(rows, params.Max)
	}
	b := &pgx.Batch{}
	queueClaim(b, params)
	br := e.db.SendBatch(ctx, b)
	claimed, err := readClaim(br, params.Max)
	// Close reports the commit: nothing read before it is known to hold.
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("claim jobs: %w", translateError(closeErr))
	}
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// readClaim reads the results of queueClaim's statements from br.
func readClaim(br pgx.BatchResults, limit int) ([]*leasetype.JobRow, error) {
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("claim jobs: plan: %w", translateError(err))
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", translateError(err))
	}
	return scanClaimed(rows, limit)
}

// claimArgs are jobClaimSQL's arguments for params.
func claimArgs(params *driver.JobClaimParams) []any {
	kinds := make([]string, 0, len(params.KindLeaseTTL))
	ttls := make([]int64, 0, len(params.KindLeaseTTL))
	for kind, ttl := range params.KindLeaseTTL {
		kinds = append(kinds, kind)
		ttls = append(ttls, ttl.Milliseconds())
	}
	// The head of the claim order: before every priority, time and ID.
	afterPriority, afterTime, afterID := int16(0), pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, int64(0)
	if a := params.After; a != nil {
		afterPriority, afterTime, afterID = int16(a.Priority), pgtype.Timestamptz{Time: a.ScheduledAt, Valid: true}, a.ID
	}
	// pgx sends a nil slice as NULL, and the claim's filters are written
	// for arrays: NULL would match nothing.
	return []any{params.Queue, params.Max, params.Owner,
		kinds, ttls, params.DefaultLeaseTTL.Milliseconds(), nonNil(params.StuckKinds),
		nonNil(params.Kinds), nonNil(params.ExcludeKinds), afterPriority, afterTime, afterID}
}

// scanClaimed reads the rows of jobClaimSQL, closes them and returns the
// jobs in claim order.
func scanClaimed(rows pgx.Rows, limit int) ([]*leasetype.JobRow, error) {
	jobs, err := scanJobs(rows, limit)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", translateError(err))
	}
	// UPDATE ... RETURNING has no order of its own.
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return driver.PositionOf(a).Compare(driver.PositionOf(b))
	})
	return jobs, nil
}

func (e *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error) {
	if len(params.Leases) == 0 {
		return []int64{}, nil
	}
	ids := make([]int64, len(params.Leases))
	tokens := make([]int64, len(params.Leases))
	ttls := make([]int64, len(params.Leases))
	for i, l := range params.Leases {
		ids[i], tokens[i], ttls[i] = l.ID, l.Token, l.TTL.Milliseconds()
	}
	return e.queryIDs(ctx, "renew leases", jobHeartbeatSQL, ids, tokens, ttls, params.Owner)
}

// finishStates are the states a lease may end in.
var finishStates = []leasetype.JobState{
	leasetype.JobStateCompleted, leasetype.JobStateRetryable, leasetype.JobStateDiscarded,
	leasetype.JobStateCancelled, leasetype.JobStateAvailable, leasetype.JobStateScheduled,
}

func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	if len(params.Items) == 0 {
		return []int64{}, nil
	}
	query, args, err := finishQuery(params)
	if err != nil {
		return nil, err
	}
	if _, inTx := e.db.(pgx.Tx); inTx && params.TxBound > 0 {
		return e.finishBounded(ctx, params.TxBound, query, args)
	}
	return e.queryIDs(ctx, "finish leases", query, args...)
}

// finishQuery returns the statement that writes params (jobCompleteOneSQL
// for one plain completion, jobCompleteSQL when every item is one, else
// jobFinishSQL) and its arguments.
func finishQuery(params *driver.JobFinishParams) (string, []any, error) {
	n := len(params.Items)
	if allCompletions(params.Items) {
		if n == 1 {
			return jobCompleteOneSQL, []any{params.Items[0].ID, params.Items[0].Token, params.Owner}, nil
		}
		ids, tokens := make([]int64, n), make([]int64, n)
		for i, it := range params.Items {
			ids[i], tokens[i] = it.ID, it.Token
		}
		return jobCompleteSQL, []any{ids, tokens, params.Owner}, nil
	}
	var (
		ids        = make([]int64, n)
		tokens     = make([]int64, n)
		states     = make([]string, n)
		outcomes   = make([]string, n)
		scheduled  = make([]pgtype.Timestamptz, n)
		errs       = make([]string, n)
		countError = make([]bool, n)
	)
	for i, it := range params.Items {
		if !slices.Contains(finishStates, it.State) {
			return "", nil, fmt.Errorf("finish leases: job %d: cannot end a lease in state %q", it.ID, it.State)
		}
		ids[i], tokens[i] = it.ID, it.Token
		states[i], outcomes[i] = string(it.State), string(it.Outcome)
		if it.ScheduledAt != nil {
			scheduled[i] = pgtype.Timestamptz{Time: *it.ScheduledAt, Valid: true}
		}
		errs[i], countError[i] = it.Error, it.CountError
	}
	return jobFinishSQL, []any{ids, tokens, states, outcomes, scheduled, errs, countError, params.Owner}, nil
}

var _ driver.FinishClaimer = (*executor)(nil)

// JobFinishAndClaim sends the outcome statement and the claim as one batch:
// one round trip, and one implicit transaction (a single Sync in the
// extended protocol, one multi-statement query in the simple protocol), so
// the claim's failure rolls the outcomes back too. Inside a caller's
// transaction the two run one after the other in it.
func (e *executor) JobFinishAndClaim(ctx context.Context, finish *driver.JobFinishParams, claim *driver.JobClaimParams) ([]int64, []*leasetype.JobRow, error) {
	if _, inTx := e.db.(pgx.Tx); inTx || len(finish.Items) == 0 || claim.Max < 1 {
		written, err := e.JobFinish(ctx, finish)
		if err != nil {
			return nil, nil, err
		}
		rows, err := e.JobClaim(ctx, claim)
		return written, rows, err
	}
	query, args, err := finishQuery(finish)
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(query, args...)
	queueClaim(b, claim)
	br := e.db.SendBatch(ctx, b)
	// Close reports the commit: nothing read before it is known to hold.
	written, rows, err := readFinishAndClaim(br, claim.Max)
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("finish leases and claim jobs: %w", translateError(closeErr))
	}
	if err != nil {
		return nil, nil, err
	}
	return written, rows, nil
}

var _ driver.AttemptsClaimer = (*executor)(nil)

var _ driver.QueueKeyPruner = (*executor)(nil)

// JobAttemptsAndClaim sends the attempt read and the claim as one batch:
// one round trip and one implicit transaction, as JobFinishAndClaim's.
// Inside a caller's transaction the two run one after the other in it.
func (e *executor) JobAttemptsAndClaim(ctx context.Context, attempts *driver.JobAttemptsParams, claim *driver.JobClaimParams) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	if _, inTx := e.db.(pgx.Tx); inTx || len(attempts.Leases) == 0 || claim.Max < 1 {
		found, err := e.JobAttempts(ctx, attempts)
		if err != nil {
			return nil, nil, err
		}
		rows, err := e.JobClaim(ctx, claim)
		return found, rows, err
	}
	ids, tokens, err := leaseArrays(attempts)
	if err != nil {
		return nil, nil, err
	}
	b := &pgx.Batch{}
	b.Queue(jobAttemptsOfLeasesSQL, ids, tokens)
	queueClaim(b, claim)
	br := e.db.SendBatch(ctx, b)
	found, rows, err := readAttemptsAndClaim(br, len(ids), claim.Max)
	// Close reports the commit: nothing read before it is known to hold.
	if closeErr := br.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("read attempts and claim jobs: %w", translateError(closeErr))
	}
	if err != nil {
		return nil, nil, err
	}
	return found, rows, nil
}

// readAttemptsAndClaim reads the results of JobAttemptsAndClaim's batch.
func readAttemptsAndClaim(br pgx.BatchResults, leases, limit int) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("list attempts of %d leases: %w", leases, translateError(err))
	}
	found, err := scanLeaseAttempts(rows, leases)
	if err != nil {
		return nil, nil, err
	}
	claimed, err := readClaim(br, limit)
	if err != nil {
		return nil, nil, err
	}
	return found, claimed, nil
}

// readFinishAndClaim reads the results of JobFinishAndClaim's batch.
func readFinishAndClaim(br pgx.BatchResults, limit int) ([]int64, []*leasetype.JobRow, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("finish leases: %w", translateError(err))
	}
	written, err := scanIDs(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("finish leases: %w", translateError(err))
	}
	claimed, err := readClaim(br, limit)
	if err != nil {
		return nil, nil, err
	}
	return written, claimed, nil
}

func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	if params.Limit < 1 {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, jobExpireSQL, params.Limit, params.MaxExpiries, params.Queue, nonNil(params.Kinds))
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", translateError(err))
	}
	jobs, err := scanJobs(rows, params.Limit)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", translateError(err))
	}
	return jobs, nil
}

// allCompletions reports whether every item is a plain completion, which
// jobCompleteSQL writes.
func allCompletions(items []*driver.JobFinish) bool {
	for _, it := range items {
		if it.State != leasetype.JobStateCompleted || it.Outcome != leasetype.OutcomeCompleted ||
			it.Error != "" || it.CountError || it.ScheduledAt != nil {
			return false
		}
	}
	return true
}

// nonNil returns s, or an empty slice for nil: pgx encodes a nil slice as
// NULL, an empty one as an empty array.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
