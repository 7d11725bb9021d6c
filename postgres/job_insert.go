package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// uniqueKeyHeld is the predicate of the unique-key index (migration 3): a key
// is held by every unfinished job, and by a finished one whose
// unique_finished bitmask names its state (1 completed, 2 discarded, 4
// cancelled). The insert's ON CONFLICT target repeats it word for word, so
// that the planner infers the index, and the lookup of the existing holder
// uses it too, so that a skipped row always finds the job that skipped it.
const uniqueKeyHeld = `unique_key IS NOT NULL
      AND (state IN ('available', 'scheduled', 'running', 'retryable', 'stuck')
           OR (state = 'completed' AND unique_finished & 1 <> 0)
           OR (state = 'discarded' AND unique_finished & 2 <> 0)
           OR (state = 'cancelled' AND unique_finished & 4 <> 0))`

// jobInsertManySQL inserts a batch from parallel arrays in one statement.
// IDs are drawn from the sequence up front, in input order, so that the rows
// returned can be matched to their input position (ord). Rows whose key is
// taken are skipped by the unique index, which makes concurrent inserts safe.
//
// Rows go in in unique-key order: an insert waits for a concurrent
// uncommitted holder of its key, and two batches that take the same keys in
// opposite orders would otherwise deadlock. Within a key, input order holds,
// so the first of two rows with the same key is the one inserted.
const jobInsertManySQL = jobInsertCTEsSQL + jobInsertSelectSQL

// jobInsertNotifySQL is jobInsertManySQL that also wakes the listeners of
// the queues it inserted available jobs into, so that a single insert
// outside a transaction is one statement and one round trip. pg_notify is
// volatile, so the notified CTE is evaluated once, and only when rows were
// inserted; the notifications go out when the statement commits.
const jobInsertNotifySQL = jobInsertCTEsSQL + jobInsertNotifiedSQL

// jobInsertNotifiedSQL ends an insert that notifies: the notified CTE and
// the rows.
const jobInsertNotifiedSQL = `,
notified AS (
	SELECT count(pg_notify('` + insertChannel + `', q.queue)) AS notifications
	FROM (SELECT DISTINCT queue FROM inserted WHERE state = 'available') AS q
)
SELECT input.ord, inserted.*
FROM inserted JOIN input ON input.new_id = inserted.id, notified`

// jobInsertLeasedSQL and jobInsertLeasedNotifySQL are jobInsertManySQL and
// jobInsertNotifySQL that insert the rows $13 marks (a boolean per input
// row, only rows of queue $17) running, leased to owner $14, as the claim
// leases them (jobLeaseSetSQL), with the lease TTL $15 (ms) and the stuck
// expiry policy where $16 says so, both per row and worked out by the
// caller as the claim works them out. A marked row scheduled in the
// future, or any while queue $17 is paused, goes in as the others do. A leased row is not in the claim index,
// so it leaves no entry there for claims to pass.
const (
	jobInsertLeasedSQL       = jobInsertLeasedCTEsSQL + jobInsertSelectSQL
	jobInsertLeasedNotifySQL = jobInsertLeasedCTEsSQL + jobInsertNotifiedSQL
)

// jobInsertSelectSQL ends an insert that does not notify: the rows.
const jobInsertSelectSQL = `
SELECT input.ord, inserted.*
FROM inserted JOIN input ON input.new_id = inserted.id`

const jobInsertCTEsSQL = jobInsertInputSQL + `,
inserted AS (
	INSERT INTO leasehold_job (` + jobInsertColumnsSQL + `)
	SELECT new_id, in_kind, in_queue,
		CASE WHEN in_scheduled_at > now() THEN 'scheduled' ELSE 'available' END,
		` + jobInsertValuesSQL + `
	FROM input
	` + jobInsertConflictSQL + `
)`

const jobInsertLeasedCTEsSQL = jobInsertLeasedInputSQL + `,
leasing AS MATERIALIZED (
	SELECT input.*, in_lease AND NOT coalesce(in_scheduled_at > now(), false) AND NOT queue_paused AS leased
	FROM input,
		(SELECT EXISTS (SELECT 1 FROM leasehold_queue q WHERE q.name = $17 AND q.paused_at IS NOT NULL) AS queue_paused) AS pause
),
inserted AS (
	INSERT INTO leasehold_job (` + jobInsertColumnsSQL + `,
	                           attempt, lease_token, lease_owner, leased_at, lease_until, expiry_policy)
	SELECT new_id, in_kind, in_queue,
		CASE WHEN in_scheduled_at > now() THEN 'scheduled' WHEN leased THEN 'running' ELSE 'available' END,
		` + jobInsertValuesSQL + `,
		leased::int, leased::int, CASE WHEN leased THEN $14 END, CASE WHEN leased THEN now() END,
		CASE WHEN leased THEN now() + in_lease_ms * interval '1 millisecond' END,
		CASE WHEN leased AND in_stuck THEN 'stuck' ELSE 'retry' END
	FROM leasing
	` + jobInsertConflictSQL + `
)`

const jobInsertInputSQL = jobInsertInputHeadSQL + `)
		WITH ORDINALITY AS i(` + jobInsertInputNamesSQL + `, ord)
	ORDER BY ord
)`

// jobInsertLeasedInputSQL is jobInsertInputSQL with each row's lease mark,
// TTL and policy. This single unnest, the leasing CTE, which decides each
// row's lease once, and the one look at the queue's pause keep the
// statement's generic plan (which assumes ten rows) as cheap as its custom
// ones, so that the server plans it once per session: a join of a second
// unnest, the decision inlined into each column it sets, or a look at the
// pause per row had it plan the statement on every call, at twice the cost
// of running it.
const jobInsertLeasedInputSQL = jobInsertInputHeadSQL + `,
	            $13::boolean[], $15::bigint[], $16::boolean[])
		WITH ORDINALITY AS i(` + jobInsertInputNamesSQL + `,
		                     in_lease, in_lease_ms, in_stuck, ord)
	ORDER BY ord
)`

const (
	jobInsertInputHeadSQL = `
WITH input AS MATERIALIZED (
	SELECT nextval('leasehold_job_id_seq') AS new_id, i.*
	FROM unnest($1::text[], $2::text[], $3::int[], $4::jsonb[], $5::jsonb[],
	            $6::text[], $7::int[], $8::bigint[], $9::timestamptz[], $10::smallint[],
	            $11::text[], $12::text[]`
	jobInsertInputNamesSQL = `in_kind, in_queue, in_priority, in_args, in_metadata,
		                     in_unique_key, in_max_attempts, in_lease_ttl_ms, in_scheduled_at,
		                     in_unique_finished, in_flow_key, in_sequence_key`
)

// jobInsertColumnsSQL and jobInsertValuesSQL are the columns every insert
// writes and the values of those after the state.
const (
	jobInsertColumnsSQL = `id, kind, queue, state, priority, args, metadata,
	                           unique_key, max_attempts, lease_ttl_ms, scheduled_at, unique_finished,
	                           flow_key, sequence_key`
	jobInsertValuesSQL = `in_priority, in_args, in_metadata, in_unique_key, in_max_attempts,
		in_lease_ttl_ms, coalesce(in_scheduled_at, now()), in_unique_finished,
		in_flow_key, in_sequence_key`
)

// jobInsertConflictSQL orders the rows and skips those whose unique key is
// held.
const jobInsertConflictSQL = `ORDER BY in_unique_key, ord
	ON CONFLICT (unique_key) WHERE ` + uniqueKeyHeld + `
	DO NOTHING
	RETURNING ` + jobColumns

// jobGetHoldersByKeysSQL returns the jobs holding the given unique keys.
const jobGetHoldersByKeysSQL = `
SELECT ` + jobColumns + `
FROM leasehold_job
WHERE unique_key = ANY($1::text[]) AND ` + uniqueKeyHeld

// notifyInsertsSQL wakes the listeners of each queue in $1. Postgres delivers
// the notifications when the transaction commits.
const notifyInsertsSQL = `
SELECT pg_notify('` + insertChannel + `', q) FROM unnest($1::text[]) AS q`

// jobCopyColumns are the columns JobInsertFast copies; the rest take their
// defaults.
var jobCopyColumns = []string{
	"kind", "queue", "state", "priority", "args", "metadata",
	"max_attempts", "lease_ttl_ms", "scheduled_at", "unique_finished",
	"flow_key", "sequence_key",
}

// maxInsertRounds bounds JobInsertMany's retries. A round is retried only
// when a job holding a skipped row's unique key finished between the insert
// and the lookup, so more than a couple of rounds means something is wrong.
const maxInsertRounds = 16

// errFastUniqueKey is returned by JobInsertFast for a job with a unique key.
var errFastUniqueKey = errors.New("leasehold/postgres: JobInsertFast does not take jobs with unique keys")

func (e *executor) JobInsertMany(ctx context.Context, params *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	return e.insertLeased(ctx, params, nil)
}

var _ driver.LeasedInserter = (*executor)(nil)

// JobInsertLeased is JobInsertMany with the jobs lease selects inserted
// leased (jobInsertLeasedSQL): the same statements, the same round trips.
func (e *executor) JobInsertLeased(ctx context.Context, insert *driver.JobInsertManyParams, lease *driver.JobClaimParams) ([]*driver.JobInsertResult, error) {
	return e.insertLeased(ctx, insert, driver.NewInsertLease(insert.Jobs, lease))
}

// insertLeased is JobInsertMany, inserting the jobs lease marks leased
// (none when lease is nil).
func (e *executor) insertLeased(ctx context.Context, params *driver.JobInsertManyParams, lease *driver.InsertLease) ([]*driver.JobInsertResult, error) {
	jobs := params.Jobs
	results := make([]*driver.JobInsertResult, len(jobs))
	if len(jobs) == 0 {
		return results, nil
	}
	tracker := params.SenderTracker
	deps := driver.HasDependencies(jobs)
	if deps {
		if err := driver.ValidateDependencies(jobs); err != nil {
			return nil, fmt.Errorf("insert jobs: %w", err)
		}
	}
	if _, inTx := e.db.(pgx.Tx); len(jobs) == 1 && !inTx && !deps {
		var results []*driver.JobInsertResult
		err := e.withSender(ctx, tracker, func(on *executor, s *sender) (err error) {
			results, err = on.insertAlone(ctx, jobs[0], s, e.limiter(), tracker, lease)
			return err
		})
		return results, err
	}
	err := e.withSender(ctx, tracker, func(on *executor, s *sender) error {
		var notices noticesOf
		err := on.inTx(ctx, func(tx *executor) (err error) {
			notices, err = tx.insertManyTx(ctx, jobs, results, s, e.limiter(), tracker, lease)
			if err != nil || !deps {
				return err
			}
			return tx.applyDependencies(ctx, jobs, results)
		})
		notices.done(err)
		return err
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// insertQuery is the insert statement: with the notification or not, and
// leasing the rows lease marks when lease is not nil.
func insertQuery(notify bool, lease *driver.InsertLease) string {
	switch {
	case lease != nil && notify:
		return jobInsertLeasedNotifySQL
	case lease != nil:
		return jobInsertLeasedSQL
	case notify:
		return jobInsertNotifySQL
	}
	return jobInsertManySQL
}

// leaseArgs are jobInsertLeasedSQL's arguments after the rows' ($13 on),
// for the rows params[i], i in which: the marks, the owner, each row's
// lease TTL and expiry policy (driver.InsertLease.Of), and the queue of
// the rows marked.
func leaseArgs(lease *driver.InsertLease, params []*driver.JobInsertParams, which []int) []any {
	marks := make([]bool, len(which))
	ttls := make([]int64, len(which))
	stuck := make([]bool, len(which))
	for k, i := range which {
		if lease.Marked(i) {
			ttl, st := lease.Of(params[i])
			marks[k], ttls[k], stuck[k] = true, ttl.Milliseconds(), st
		}
	}
	return []any{marks, lease.Claim.Owner, ttls, stuck, lease.Claim.Queue}
}

// limiter is the driver's notification limiter for the inserts e commits
// itself: nil (every insert notifies) inside a transaction, whose commit is
// the caller's, and for a driver without one.
func (e *executor) limiter() *noticeLimiter {
	if e.drv == nil {
		return nil
	}
	return e.drv.notices
}

// insertManyTx is JobInsertMany inside a transaction: rounds of inserts
// until every job is inserted or resolved to the holder of its unique key,
// then one notification per queue that got an available job and that lim
// lets notify. It returns the queues' tickets, for the caller to report the
// commit's outcome to.
func (e *executor) insertManyTx(ctx context.Context, params []*driver.JobInsertParams, results []*driver.JobInsertResult, s *sender,
	lim *noticeLimiter, tracker driver.SenderTracker, lease *driver.InsertLease,
) (noticesOf, error) {
	pending := make([]int, len(params))
	for i := range pending {
		pending[i] = i
	}
	var queues []string
	for round := 0; len(pending) > 0; round++ {
		if round == maxInsertRounds {
			return nil, fmt.Errorf("insert jobs: unique keys still contended after %d rounds", round)
		}
		inserted, err := e.insertRound(ctx, insertQuery(false, lease), params, pending, lease)
		if err != nil {
			return nil, err
		}
		var skipped []int
		for _, i := range pending {
			job, ok := inserted[i]
			if !ok {
				skipped = append(skipped, i)
				continue
			}
			results[i] = &driver.JobInsertResult{Job: job}
			if job.State == leasetype.JobStateAvailable && !slices.Contains(queues, job.Queue) {
				queues = append(queues, job.Queue)
			}
		}
		if pending, err = e.resolveSkipped(ctx, params, skipped, results); err != nil {
			return nil, err
		}
	}
	notices := lim.allowAll(queues, tracker)
	notify, tracked := notices.notifying()
	s.sending(tracked...)
	return notices, e.notify(ctx, notify)
}

// insertAlone inserts one job outside a transaction. Each statement stands
// alone: the insert (with its notification, jobInsertNotifySQL, when lim
// lets it notify, and leasing the job when lease marks it) is one round
// trip, and when the job's unique key is held, the holder is read instead;
// a holder that finished in between lets the insert try again.
func (e *executor) insertAlone(ctx context.Context, p *driver.JobInsertParams, s *sender,
	lim *noticeLimiter, tracker driver.SenderTracker, lease *driver.InsertLease,
) ([]*driver.JobInsertResult, error) {
	params := []*driver.JobInsertParams{p}
	results := make([]*driver.JobInsertResult, 1)
	for range maxInsertRounds {
		t := lim.allow(p.Queue, tracker)
		if t.notify && t.tracked {
			s.sending(p.Queue)
		}
		inserted, err := e.insertRound(ctx, insertQuery(t.notify, lease), params, []int{0}, lease)
		job, ok := inserted[0]
		committed := err == nil && ok && job.State == leasetype.JobStateAvailable
		if !committed {
			s.unsent()
		}
		t.done(committed, err != nil)
		if err != nil {
			return nil, err
		}
		if ok {
			results[0] = &driver.JobInsertResult{Job: job}
			return results, nil
		}
		retry, err := e.resolveSkipped(ctx, params, []int{0}, results)
		if err != nil {
			return nil, err
		}
		if len(retry) == 0 {
			return results, nil
		}
	}
	return nil, fmt.Errorf("insert jobs: unique keys still contended after %d rounds", maxInsertRounds)
}

// insertRound inserts params[i] for each i in which with query
// (insertQuery's, leasing with lease when not nil), and returns the rows
// inserted by input position. Rows skipped for their unique key are absent.
func (e *executor) insertRound(ctx context.Context, query string, params []*driver.JobInsertParams, which []int, lease *driver.InsertLease) (map[int]*leasetype.JobRow, error) {
	args := insertArgs(params, which)
	if lease != nil {
		args = append(args, leaseArgs(lease, params, which)...)
	}
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("insert jobs: %w", translateError(err))
	}
	return scanInserted(rows, which)
}

// insertArgs are the insert statement's arguments for params[i], for each
// i in which.
func insertArgs(params []*driver.JobInsertParams, which []int) []any {
	n := len(which)
	var (
		kinds       = make([]string, n)
		queues      = make([]string, n)
		priorities  = make([]int32, n)
		args        = make([]json.RawMessage, n)
		metadata    = make([]json.RawMessage, n)
		uniqueKeys  = make([]pgtype.Text, n)
		maxAttempts = make([]int32, n)
		ttls        = make([]pgtype.Int8, n)
		scheduled   = make([]pgtype.Timestamptz, n)
		uniqueFin   = make([]int16, n)
		flowKeys    = make([]pgtype.Text, n)
		sequences   = make([]pgtype.Text, n)
	)
	// args and metadata go as json.RawMessage, not []byte: the modes that
	// describe the statement (pgx's default) send them as jsonb[] in binary
	// either way, but the modes that do not (exec, simple_protocol, as used
	// behind PgBouncer) pick the type from the Go value, and would send
	// []byte as bytea, which the jsonb[] cast then refuses (22P02). A
	// json.RawMessage is sent as json, which casts to jsonb.
	for k, i := range which {
		p := params[i]
		kinds[k] = p.Kind
		queues[k] = p.Queue
		priorities[k] = int32(priorityOrDefault(p.Priority))
		args[k] = p.EncodedArgs
		metadata[k] = driver.MetadataOrEmpty(p.Metadata)
		uniqueKeys[k] = pgtype.Text{String: p.UniqueKey, Valid: p.UniqueKey != ""}
		maxAttempts[k] = int32(p.MaxAttempts)
		ttls[k] = leaseTTLParam(p.LeaseTTL)
		if p.ScheduledAt != nil {
			scheduled[k] = pgtype.Timestamptz{Time: *p.ScheduledAt, Valid: true}
		}
		uniqueFin[k] = int16(driver.UniqueFinishedMask(p.UniqueFinished))
		flowKeys[k] = textOrNull(p.Key)
		sequences[k] = textOrNull(p.Sequence)
	}
	return []any{kinds, queues, priorities, args, metadata, uniqueKeys, maxAttempts, ttls, scheduled, uniqueFin,
		flowKeys, sequences}
}

// scanInserted reads the rows of an insert statement, closes them and
// returns the jobs by input position (which[ord-1]).
func scanInserted(rows pgx.Rows, which []int) (map[int]*leasetype.JobRow, error) {
	defer rows.Close()
	inserted := make(map[int]*leasetype.JobRow, len(which))
	var ord int64
	dest := newJobDest(&ord)
	for rows.Next() {
		job, err := dest.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("scan inserted job: %w", err)
		}
		inserted[which[ord-1]] = job
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert jobs: %w", translateError(err))
	}
	return inserted, nil
}

// resolveSkipped fills results for the skipped rows with the jobs that hold
// their unique keys (by the index's rule, uniqueKeyHeld). It returns the rows whose key holder finished
// in the meantime: they must be inserted again.
func (e *executor) resolveSkipped(ctx context.Context, params []*driver.JobInsertParams, skipped []int, results []*driver.JobInsertResult) ([]int, error) {
	if len(skipped) == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(skipped))
	for _, i := range skipped {
		if params[i].UniqueKey == "" {
			return nil, fmt.Errorf("insert jobs: job %d without a unique key was not inserted", i)
		}
		keys = append(keys, params[i].UniqueKey)
	}
	rows, err := e.db.Query(ctx, jobGetHoldersByKeysSQL, keys)
	if err != nil {
		return nil, fmt.Errorf("read jobs by unique key: %w", translateError(err))
	}
	existing, err := scanJobs(rows, len(keys))
	if err != nil {
		return nil, fmt.Errorf("read jobs by unique key: %w", translateError(err))
	}
	byKey := make(map[string]*leasetype.JobRow, len(existing))
	for _, j := range existing {
		byKey[j.UniqueKey] = j
	}
	var retry []int
	for _, i := range skipped {
		if j, ok := byKey[params[i].UniqueKey]; ok {
			results[i] = &driver.JobInsertResult{Job: j, UniqueSkipped: true}
		} else {
			retry = append(retry, i)
		}
	}
	return retry, nil
}

func (e *executor) JobInsertFast(ctx context.Context, params *driver.JobInsertFastParams) (int, error) {
	jobs := params.Jobs
	for _, p := range jobs {
		if p.UniqueKey != "" {
			return 0, fmt.Errorf("insert jobs fast: %w", errFastUniqueKey)
		}
	}
	if len(jobs) == 0 {
		return 0, nil
	}
	var n int64
	tracker := params.SenderTracker
	err := e.withSender(ctx, tracker, func(on *executor, s *sender) error {
		var notices noticesOf
		err := on.inTx(ctx, func(tx *executor) (err error) {
			n, notices, err = tx.insertFastTx(ctx, jobs, s, e.limiter(), tracker)
			return err
		})
		notices.done(err)
		return err
	})
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// insertFastTx is JobInsertFast inside a transaction: one COPY, then one
// notification per queue that got an available job and that lim lets
// notify. It returns the queues' tickets, as insertManyTx.
func (e *executor) insertFastTx(ctx context.Context, params []*driver.JobInsertParams, s *sender,
	lim *noticeLimiter, tracker driver.SenderTracker,
) (int64, noticesOf, error) {
	// COPY cannot fall back to a column default row by row, so the
	// default schedule (now) and the state it implies are decided here,
	// on the database clock read in the same transaction.
	var now time.Time
	if err := e.db.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
		return 0, nil, fmt.Errorf("read database clock: %w", translateError(err))
	}
	var queues []string
	rows := make([][]any, len(params))
	for i, p := range params {
		state, at := leasetype.JobStateAvailable, now
		if p.ScheduledAt != nil {
			at = *p.ScheduledAt
			if at.After(now) {
				state = leasetype.JobStateScheduled
			}
		}
		if state == leasetype.JobStateAvailable && !slices.Contains(queues, p.Queue) {
			queues = append(queues, p.Queue)
		}
		rows[i] = []any{
			p.Kind, p.Queue, string(state), int16(priorityOrDefault(p.Priority)),
			p.EncodedArgs, driver.MetadataOrEmpty(p.Metadata), int32(p.MaxAttempts),
			leaseTTLParam(p.LeaseTTL), at, int16(driver.UniqueFinishedMask(p.UniqueFinished)),
			textOrNull(p.Key), textOrNull(p.Sequence),
		}
	}
	n, err := e.db.CopyFrom(ctx, pgx.Identifier{"leasehold_job"}, jobCopyColumns, pgx.CopyFromRows(rows))
	if err != nil {
		return 0, nil, fmt.Errorf("copy jobs: %w", translateError(err))
	}
	notices := lim.allowAll(queues, tracker)
	notify, tracked := notices.notifying()
	s.sending(tracked...)
	return n, notices, e.notify(ctx, notify)
}

// sendTrailingNotice notifies queue on the pool, on its own, for inserts the
// limiter held back (noticeLimiter), telling tracker, when not nil, which
// session sends it. A failure is logged: listeners then find the jobs at
// their next poll.
func (d *Driver) sendTrailingNotice(ctx context.Context, queue string, tracker driver.SenderTracker) {
	e := &executor{db: d.q.wrap(d.pool), drv: d}
	err := e.withSender(ctx, tracker, func(on *executor, s *sender) error {
		s.sending(queue)
		return on.notify(ctx, []string{queue})
	})
	if err != nil {
		d.logger.Warn("leasehold/postgres: trailing insert notification failed; listeners find the jobs at their next poll",
			"queue", queue, "error", err)
	}
}

// notify wakes the listeners of queues when the transaction commits.
func (e *executor) notify(ctx context.Context, queues []string) error {
	if len(queues) == 0 {
		return nil
	}
	if _, err := e.db.Exec(ctx, notifyInsertsSQL, queues); err != nil {
		return fmt.Errorf("notify inserts: %w", translateError(err))
	}
	return nil
}

// priorityOrDefault maps the zero priority to the column default, 1.
func priorityOrDefault(p int) int {
	if p == 0 {
		return 1
	}
	return p
}

// textOrNull is a text parameter that stores "" as NULL.
func textOrNull(s string) pgtype.Text {
	return pgtype.Text{String: s, Valid: s != ""}
}

// leaseTTLParam is the lease_ttl_ms value for a per-job TTL: NULL for zero.
func leaseTTLParam(ttl time.Duration) pgtype.Int8 {
	return pgtype.Int8{Int64: ttl.Milliseconds(), Valid: ttl > 0}
}

// sender is the session an auto-commit insert runs on, and the tracker it
// reports its notices to (driver.SenderTracker). A nil *sender reports
// nothing.
type sender struct {
	tracker driver.SenderTracker
	pid     int64
	queues  []string // said Sending and not yet withdrawn
}

// sending tells the tracker that this session will notify queues.
func (s *sender) sending(queues ...string) {
	if s == nil {
		return
	}
	for _, q := range queues {
		s.tracker.Sending(s.pid, q)
		s.queues = append(s.queues, q)
	}
}

// unsent withdraws every Sending not yet withdrawn.
func (s *sender) unsent() {
	if s == nil {
		return
	}
	for _, q := range s.queues {
		s.tracker.Unsent(s.pid, q)
	}
	s.queues = s.queues[:0]
}

// withSender runs fn on a connection held for it alone when tracker is not
// nil and e runs on the pool: the connection's backend
// process ID is the sender of the notices of what fn inserts, and the
// connection goes back to the pool only after fn's notices that may not have
// gone out are withdrawn (every Sending when fn fails). Otherwise fn runs on
// e with a nil sender.
//
// Behind a connection pooler (behindPooler) the session's process ID is the
// pooler's, not that of the server backend that sends the notice, so the
// sender cannot be known: fn runs on the pool with a sender that reports
// poolerSender, which no notice carries. The client then does not recognise
// its own notices (one extra claim per insert, which finds nothing) and still
// sees when none arrive at all (leasehold's silence warning).
func (e *executor) withSender(ctx context.Context, tracker driver.SenderTracker, fn func(*executor, *sender) error) error {
	if e.drv == nil || tracker == nil {
		return fn(e, nil)
	}
	if e.drv.pooler.Load() == poolerYes {
		return e.runSender(fn, &sender{tracker: tracker, pid: poolerSender}, e)
	}
	conn, err := e.drv.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("insert jobs: acquire connection: %w", translateError(err))
	}
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	if e.drv.pooler.Load() == 0 {
		pooled, err := e.drv.detectPooler(ctx, conn.Conn(), pid)
		if err != nil {
			return fmt.Errorf("insert jobs: %w", err)
		}
		if pooled {
			return e.runSender(fn, &sender{tracker: tracker, pid: poolerSender}, e)
		}
	}
	return e.runSender(fn, &sender{tracker: tracker, pid: int64(pid)}, &executor{db: e.drv.q.wrap(conn)})
}

// runSender runs fn on on with s, and withdraws s's notices when fn fails.
func (e *executor) runSender(fn func(*executor, *sender) error, s *sender, on *executor) error {
	err := fn(on, s)
	if err != nil {
		s.unsent()
	}
	return err
}

// poolerSender is the sender of inserts made through a connection pooler:
// no notice carries it (backend process IDs are positive).
const poolerSender = -1

// Values of Driver.pooler.
const (
	poolerNo  = 1
	poolerYes = 2
)

// backendPIDSQL reads the server backend's process ID.
const backendPIDSQL = `SELECT pg_backend_pid()`

// detectPooler finds out, once per driver, whether the pool's connections go
// through a connection pooler: a session whose process ID (pid, from the
// connection's start-up) is not the server backend's that runs its
// statements. PgBouncer hands out process IDs of its own. It logs the
// finding at Info when it is a pooler.
func (d *Driver) detectPooler(ctx context.Context, conn *pgx.Conn, pid uint32) (bool, error) {
	var backend uint32
	if err := conn.QueryRow(ctx, backendPIDSQL).Scan(&backend); err != nil {
		return false, fmt.Errorf("read backend process ID: %w", translateError(err))
	}
	if backend == pid {
		d.pooler.CompareAndSwap(0, poolerNo)
		return false, nil
	}
	if d.pooler.CompareAndSwap(0, poolerYes) {
		d.logger.Info("leasehold/postgres: the pool goes through a connection pooler (its session process ID is not the server's); "+
			"clients cannot recognise the notifications of their own inserts and claim once more per insert, which is harmless. "+
			"Listen on a direct connection (Options.ListenURL) or not at all (Options.DisableListen): LISTEN through a transaction-mode pooler loses notifications",
			"session_pid", pid, "backend_pid", backend)
	}
	return true, nil
}
