package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseInsert specifies JobInsertMany and JobInsertFast.
func exerciseInsert[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		full := &driver.JobInsertParams{
			Kind:        "email",
			Queue:       "mail",
			Priority:    3,
			EncodedArgs: []byte(`{"to": "a@example.com", "n": 2, "tags": ["x", "y"], "nested": {"ok": true}}`),
			Metadata:    []byte(`{"trace": "abc", "tenant": 7}`),
			UniqueKey:   "email-1",
			MaxAttempts: 7,
			LeaseTTL:    90 * time.Second,
		}
		plain := jobParams("plain", "default")
		before := mustNow(t, exec)
		rows := mustInsert(t, exec, full, plain)
		after := mustNow(t, exec)

		for i, p := range []*driver.JobInsertParams{full, plain} {
			job := rows[i]
			want := &leasetype.JobRow{
				ID: job.ID, Kind: p.Kind, Queue: p.Queue, State: leasetype.JobStateAvailable,
				Priority: p.Priority, EncodedArgs: p.EncodedArgs, Metadata: p.Metadata,
				UniqueKey: p.UniqueKey, MaxAttempts: p.MaxAttempts, LeaseTTL: p.LeaseTTL,
				ExpiryPolicy: job.ExpiryPolicy, ScheduledAt: job.ScheduledAt, CreatedAt: job.CreatedAt,
			}
			if job.ID <= 0 {
				t.Errorf("job %d: ID = %d, want > 0", i, job.ID)
			}
			assertRowEqual(t, fmt.Sprintf("inserted %s job", p.Kind), job, want)
			assertWithin(t, p.Kind+" CreatedAt", job.CreatedAt, before, after)
			assertWithin(t, p.Kind+" ScheduledAt", job.ScheduledAt, before, after)
			assertUnchanged(t, exec, "JobGet of inserted "+p.Kind+" job", job)
		}
		if rows[0].ID == rows[1].ID {
			t.Errorf("both jobs got ID %d", rows[0].ID)
		}
	})

	t.Run("ScheduledInFuture", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		now := mustNow(t, exec)
		// Long enough that a slow test run cannot reach it before the first claim.
		at := now.Add(time.Second)
		past := now.Add(-time.Hour)
		pFuture, pPast := jobParams("later", "sched"), jobParams("earlier", "sched")
		pFuture.ScheduledAt, pPast.ScheduledAt = &at, &past
		rows := mustInsert(t, exec, pFuture, pPast)
		future, earlier := rows[0], rows[1]

		if future.State != leasetype.JobStateScheduled {
			t.Errorf("future job state = %s, want scheduled", future.State)
		}
		assertNear(t, "future ScheduledAt", future.ScheduledAt, at, time.Millisecond)
		if earlier.State != leasetype.JobStateAvailable {
			t.Errorf("past job state = %s, want available", earlier.State)
		}
		assertNear(t, "past ScheduledAt", earlier.ScheduledAt, past, time.Millisecond)

		got := mustClaim(t, exec, claimParams("sched", "w", 10, longTTL))
		assertSameIDs(t, "claim before the scheduled job is due", jobIDs(got), []int64{earlier.ID})
		waitPast(t, exec, at)
		got = mustClaim(t, exec, claimParams("sched", "w", 10, longTTL))
		assertSameIDs(t, "claim after the scheduled job is due", jobIDs(got), []int64{future.ID})
	})

	t.Run("ManyInInputOrder", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		existing := jobParams("dup", "order")
		existing.UniqueKey = "order-dup"
		first := mustInsertOne(t, exec, existing)

		var params []*driver.JobInsertParams
		for i := range 20 {
			p := jobParams(fmt.Sprintf("kind-%02d", i), "order")
			p.EncodedArgs = fmt.Appendf(nil, `{"i": %d}`, i)
			p.Priority = 1 + i%4
			if i == 7 {
				p = jobParams("dup", "order")
				p.UniqueKey = "order-dup"
			}
			params = append(params, p)
		}
		res := mustInsertMany(t, exec, params...)
		seen := map[int64]bool{first.ID: true}
		for i, r := range res {
			if i == 7 {
				if !r.UniqueSkipped || r.Job.ID != first.ID {
					t.Errorf("result 7: UniqueSkipped=%v ID=%d, want the existing job %d skipped", r.UniqueSkipped, r.Job.ID, first.ID)
				}
				continue
			}
			if r.UniqueSkipped {
				t.Errorf("result %d: unexpectedly UniqueSkipped", i)
			}
			if r.Job.Kind != params[i].Kind || !jsonEqual(r.Job.EncodedArgs, params[i].EncodedArgs) || r.Job.Priority != params[i].Priority {
				t.Errorf("result %d: got kind %s args %s priority %d, want kind %s args %s priority %d",
					i, r.Job.Kind, r.Job.EncodedArgs, r.Job.Priority, params[i].Kind, params[i].EncodedArgs, params[i].Priority)
			}
			if seen[r.Job.ID] {
				t.Errorf("result %d: ID %d returned twice", i, r.Job.ID)
			}
			seen[r.Job.ID] = true
		}
		if n := countJobs(t, exec, driver.JobListParams{Queue: "order"}); n != 20 {
			t.Errorf("jobs in queue = %d, want 20", n)
		}
	})

	t.Run("UniqueKeySkipsSecond", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		p := jobParams("charge", "pay")
		p.UniqueKey = "charge-42"
		first := mustInsertMany(t, exec, p)[0]
		if first.UniqueSkipped {
			t.Fatalf("first insert: UniqueSkipped, want inserted")
		}
		p2 := jobParams("charge", "pay")
		p2.UniqueKey = "charge-42"
		p2.EncodedArgs = []byte(`{"other": true}`)
		second := mustInsertMany(t, exec, p2)[0]
		if !second.UniqueSkipped {
			t.Errorf("second insert: UniqueSkipped = false, want true")
		}
		assertRowEqual(t, "job returned for the skipped insert", second.Job, first.Job)
		if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "charge-42"}); n != 1 {
			t.Errorf("jobs with the key = %d, want 1", n)
		}
	})

	t.Run("UniqueKeyTwiceInOneBatch", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		p1, p2 := jobParams("charge", "pay"), jobParams("charge", "pay")
		p1.UniqueKey, p2.UniqueKey = "batch-key", "batch-key"
		res := mustInsertMany(t, exec, p1, jobParams("other", "pay"), p2)
		if res[0].UniqueSkipped {
			t.Errorf("first of the pair: UniqueSkipped, want inserted")
		}
		if !res[2].UniqueSkipped || res[2].Job.ID != res[0].Job.ID {
			t.Errorf("second of the pair: UniqueSkipped=%v ID=%d, want skipped with ID %d", res[2].UniqueSkipped, res[2].Job.ID, res[0].Job.ID)
		}
		if res[1].UniqueSkipped || res[1].Job.Kind != "other" {
			t.Errorf("keyless job between them: skipped=%v kind=%s, want inserted kind other", res[1].UniqueSkipped, res[1].Job.Kind)
		}
		if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "batch-key"}); n != 1 {
			t.Errorf("jobs with the key = %d, want 1", n)
		}
		if n := countJobs(t, exec, driver.JobListParams{Queue: "pay"}); n != 2 {
			t.Errorf("jobs in queue = %d, want 2", n)
		}
	})

	for _, final := range []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled} {
		t.Run("UniqueKeyFreeAfter"+title(string(final)), func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			p := jobParams("charge", "pay")
			p.UniqueKey = "k"
			first := mustInsertOne(t, exec, p)
			job := mustClaimOne(t, exec, claimParams("pay", "w", 1, longTTL))
			item := &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: final, Outcome: leasetype.OutcomeCompleted}
			if final != leasetype.JobStateCompleted {
				item.Outcome = leasetype.OutcomeCancelled
			}
			if ids := mustFinish(t, exec, "w", item); len(ids) != 1 {
				t.Fatalf("JobFinish to %s: wrote %v, want [%d]", final, ids, job.ID)
			}
			again := mustInsertMany(t, exec, p)[0]
			if again.UniqueSkipped || again.Job.ID == first.ID {
				t.Errorf("insert after the holder is %s: UniqueSkipped=%v ID=%d, want a new job", final, again.UniqueSkipped, again.Job.ID)
			}
			if again.Job.State != leasetype.JobStateAvailable {
				t.Errorf("new job state = %s, want available", again.Job.State)
			}
			if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "k"}); n != 2 {
				t.Errorf("jobs with the key = %d, want 2", n)
			}
		})
	}

	t.Run("UniqueKeyHeldWhileRunningAndStuck", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		p := jobParams("charge", "pay")
		p.UniqueKey = "k"
		first := mustInsertOne(t, exec, p)
		claim := claimParams("pay", "w", 1, shortTTL)
		claim.StuckKinds = []string{"charge"}
		job := mustClaimOne(t, exec, claim)
		if r := mustInsertMany(t, exec, p)[0]; !r.UniqueSkipped || r.Job.ID != first.ID {
			t.Errorf("insert while running: UniqueSkipped=%v ID=%d, want skipped with ID %d", r.UniqueSkipped, r.Job.ID, first.ID)
		}
		waitLeaseExpired(t, exec, job)
		if got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(got) != 1 || got[0].State != leasetype.JobStateStuck {
			t.Fatalf("JobExpire: got %s, want the job stuck", describeJobs(got))
		}
		r := mustInsertMany(t, exec, p)[0]
		if !r.UniqueSkipped || r.Job.ID != first.ID {
			t.Errorf("insert while stuck: UniqueSkipped=%v ID=%d, want skipped with ID %d", r.UniqueSkipped, r.Job.ID, first.ID)
		}
		if r.Job.State != leasetype.JobStateStuck {
			t.Errorf("returned existing job state = %s, want stuck", r.Job.State)
		}
		if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "k"}); n != 1 {
			t.Errorf("jobs with the key = %d, want 1", n)
		}
	})

	t.Run("UniqueKeyConcurrent", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const n = 20
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]*driver.JobInsertResult, n)
			errs    = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				p := jobParams("charge", "pay")
				p.UniqueKey = "race"
				p.EncodedArgs = fmt.Appendf(nil, `{"g": %d}`, i)
				<-start
				res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p}})
				if err == nil && (len(res) != 1 || res[0].Job == nil) {
					err = fmt.Errorf("got %d results", len(res))
				}
				if err == nil {
					results[i] = res[0]
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		inserted := 0
		var id int64
		for i := range n {
			if errs[i] != nil {
				t.Errorf("goroutine %d: JobInsertMany: %v", i, errs[i])
				continue
			}
			if !results[i].UniqueSkipped {
				inserted++
			}
			if id == 0 {
				id = results[i].Job.ID
			} else if results[i].Job.ID != id {
				t.Errorf("goroutine %d: got job %d, others got %d", i, results[i].Job.ID, id)
			}
		}
		if inserted != 1 {
			t.Errorf("inserts not skipped = %d, want exactly 1", inserted)
		}
		if got := countJobs(t, exec, driver.JobListParams{UniqueKey: "race"}); got != 1 {
			t.Errorf("job rows with the key = %d, want exactly 1", got)
		}
	})

	// Concurrent inserts of one key in batches with an unkeyed job: one
	// batch takes the key, the others get its job back as skipped (their
	// unkeyed jobs are inserted); once the holder is cancelled the key is
	// free again for exactly one of the next round.
	t.Run("UniqueKeyConcurrentRounds", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const n = 16
		for round := range 2 {
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				start   = make(chan struct{})
				winners []int64
				skipped = map[int64]int{}
				errs    []error
			)
			for range n {
				wg.Go(func() {
					keyed := jobParams("charge", "pay")
					keyed.UniqueKey = "rounds"
					<-start
					res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{
						Jobs: []*driver.JobInsertParams{jobParams("other", "pay"), keyed},
					})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						errs = append(errs, err)
					case len(res) != 2 || res[0].UniqueSkipped:
						errs = append(errs, fmt.Errorf("got %d results, first skipped %v", len(res), len(res) > 0 && res[0].UniqueSkipped))
					case res[1].UniqueSkipped:
						skipped[res[1].Job.ID]++
					default:
						winners = append(winners, res[1].Job.ID)
					}
				})
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				t.Errorf("round %d: JobInsertMany: %v", round, err)
			}
			if len(winners) != 1 {
				t.Fatalf("round %d: %d inserts took the key, want exactly 1", round, len(winners))
			}
			if len(skipped) != 1 || skipped[winners[0]] != n-1 {
				t.Fatalf("round %d: skipped results %v, want %d pointing at job %d", round, skipped, n-1, winners[0])
			}
			if got := countJobs(t, exec, driver.JobListParams{UniqueKey: "rounds"}); got != round+1 {
				t.Errorf("round %d: job rows with the key = %d, want %d", round, got, round+1)
			}
			if got := countJobs(t, exec, driver.JobListParams{Kind: "other"}); got != (round+1)*n {
				t.Errorf("round %d: unkeyed jobs = %d, want %d", round, got, (round+1)*n)
			}
			// Cancel the holder so that the next round can take the key.
			job, changed, err := exec.JobSetState(t.Context(), &driver.JobSetStateParams{
				ID: winners[0], FromStates: []leasetype.JobState{leasetype.JobStateAvailable}, State: leasetype.JobStateCancelled,
			})
			if err != nil || !changed || job.State != leasetype.JobStateCancelled {
				t.Fatalf("round %d: cancel the holder: %v, changed %v", round, err, changed)
			}
		}
	})

	t.Run("InTxRolledBack", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		tx, txExec := userTx(t, b, d)
		p := jobParams("charge", "pay")
		p.UniqueKey = "tx-key"
		job := mustInsertOne(t, txExec, p)
		mustGet(t, txExec, job.ID) // visible inside its own transaction
		if err := b.RollbackTx(t.Context(), tx); err != nil {
			t.Fatalf("RollbackTx: %v", err)
		}
		exec := d.GetExecutor()
		_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: job.ID})
		assertNotFound(t, "JobGet after rollback", err)
		if n := countJobs(t, exec, driver.JobListParams{}); n != 0 {
			t.Errorf("jobs after rollback = %d, want 0", n)
		}
		if r := mustInsertMany(t, exec, p)[0]; r.UniqueSkipped {
			t.Errorf("the rolled-back job still holds its unique key (existing job %d)", r.Job.ID)
		}
	})

	t.Run("InTxCommitted", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		tx, txExec := userTx(t, b, d)
		job := mustInsertOne(t, txExec, jobParams("charge", "pay"))
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		exec := d.GetExecutor()
		assertUnchanged(t, exec, "job after commit", job)
		if got := mustClaim(t, exec, claimParams("pay", "w", 10, longTTL)); len(got) != 1 || got[0].ID != job.ID {
			t.Errorf("claim after commit: got %s, want job %d", describeJobs(got), job.ID)
		}
	})

	t.Run("Fast", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const n = 250
		params := make([]*driver.JobInsertParams, n)
		for i := range params {
			params[i] = jobParams("bulk", "fast")
			params[i].EncodedArgs = fmt.Appendf(nil, `{"i": %d}`, i)
			params[i].Priority = 1 + i%4
		}
		before := mustNow(t, exec)
		count, err := exec.JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: params})
		if err != nil {
			t.Fatalf("JobInsertFast: %v", err)
		}
		after := mustNow(t, exec)
		if count != n {
			t.Errorf("JobInsertFast count = %d, want %d", count, n)
		}
		jobs := mustList(t, exec, &driver.JobListParams{Kind: "bulk", Limit: 1000})
		if len(jobs) != n {
			t.Fatalf("jobs listed = %d, want %d", len(jobs), n)
		}
		seen := map[string]bool{}
		for _, j := range jobs {
			if j.State != leasetype.JobStateAvailable || j.Queue != "fast" || j.MaxAttempts != 5 || j.Attempt != 0 || j.LeaseToken != 0 {
				t.Errorf("job %d: state %s queue %s max %d attempt %d token %d, want available fast 5 0 0",
					j.ID, j.State, j.Queue, j.MaxAttempts, j.Attempt, j.LeaseToken)
			}
			assertWithin(t, "fast-inserted CreatedAt", j.CreatedAt, before, after)
			seen[string(j.EncodedArgs)] = true
		}
		if len(seen) != n {
			t.Errorf("distinct args = %d, want %d", len(seen), n)
		}
		if got := mustClaim(t, exec, claimParams("fast", "w", n, longTTL)); len(got) != n {
			t.Errorf("claimed %d fast-inserted jobs, want %d", len(got), n)
		}
	})

	t.Run("FastRejectsUniqueKeys", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		keyed := jobParams("bulk", "fast")
		keyed.UniqueKey = "not-allowed"
		if _, err := exec.JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{jobParams("bulk", "fast"), keyed}}); err == nil {
			t.Errorf("JobInsertFast with a unique key: got no error")
		}
		if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "not-allowed"}); n != 0 {
			t.Errorf("jobs with the key = %d, want 0", n)
		}
	})

	t.Run("InsertLeased", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		li, ok := exec.(driver.LeasedInserter)
		if !ok {
			t.Skip("the executor does not implement driver.LeasedInserter")
		}
		insertLeased := func(on driver.LeasedInserter, lease *driver.JobClaimParams, params ...*driver.JobInsertParams) []*leasetype.JobRow {
			t.Helper()
			results, err := on.JobInsertLeased(t.Context(), &driver.JobInsertManyParams{Jobs: params}, lease)
			if err != nil {
				t.Fatalf("JobInsertLeased: %v", err)
			}
			if len(results) != len(params) {
				t.Fatalf("JobInsertLeased returned %d results for %d jobs", len(results), len(params))
			}
			rows := make([]*leasetype.JobRow, len(results))
			for i, r := range results {
				if r.UniqueSkipped {
					t.Fatalf("job %d skipped for its unique key", i)
				}
				rows[i] = r.Job
			}
			return rows
		}
		assertLeased := func(what string, job *leasetype.JobRow, owner string, from time.Time, ttl time.Duration, policy leasetype.ExpiryPolicy) {
			t.Helper()
			if job.State != leasetype.JobStateRunning || job.LeaseOwner != owner || job.Attempt != 1 || job.LeaseToken != 1 ||
				job.Heartbeats != 0 || job.HeartbeatAt != nil || job.ExpiryPolicy != policy {
				t.Errorf("%s: state %s owner %q attempt %d token %d heartbeats %d policy %s; want running for %s, attempt 1, token 1, no heartbeat, policy %s",
					what, job.State, job.LeaseOwner, job.Attempt, job.LeaseToken, job.Heartbeats, job.ExpiryPolicy, owner, policy)
			}
			assertWithinPtr(t, what+": leased_at", job.LeasedAt, from, mustNow(t, exec))
			assertWithinPtr(t, what+": lease_until", job.LeaseUntil, from.Add(ttl), mustNow(t, exec).Add(ttl))
			assertRowEqual(t, what+" read back", mustGet(t, exec, job.ID), job)
		}

		// An older claimable job does not hold the insert back: a leased
		// job may start before it. The leased job's lease is a lease like
		// a claim's: its token renews and finishes it.
		older := mustInsertOne(t, exec, jobParams("k", "q"))
		start := mustNow(t, exec)
		job := insertLeased(li, claimParams("q", "worker-1", 1, longTTL), jobParams("k", "q"))[0]
		assertLeased("leased job", job, "worker-1", start, longTTL, leasetype.ExpiryRetry)
		assertUnchanged(t, exec, "older job", older)
		if ids := mustHeartbeat(t, exec, "worker-1", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: longTTL}); len(ids) != 1 {
			t.Errorf("heartbeat of the leased job renewed %v, want it", ids)
		}
		assertSameIDs(t, "finished", mustFinish(t, exec, "worker-1", completeItem(job)), []int64{job.ID})
		if n := len(mustAttempts(t, exec, job.ID)); n != 1 {
			t.Errorf("attempt rows of the leased job = %d, want 1", n)
		}
		mustClaimOne(t, exec, claimParams("q", "worker-2", 1, longTTL)) // the older job

		// Max, Queue and the kind filters select; the job's own TTL, the
		// kind's and StuckKinds apply as in a claim.
		lease := claimParams("q", "worker-1", 2, longTTL)
		lease.KindLeaseTTL = map[string]time.Duration{"slow": 2 * longTTL}
		lease.StuckKinds = []string{"careful"}
		lease.ExcludeKinds = []string{"skip"}
		own := jobParams("k", "q")
		own.LeaseTTL = 3 * longTTL
		start = mustNow(t, exec)
		rows := insertLeased(li, lease, jobParams("k", "other"), jobParams("skip", "q"), jobParams("slow", "q"), jobParams("careful", "q"), own)
		for i, what := range []string{"job of another queue", "job of an excluded kind"} {
			if rows[i].State != leasetype.JobStateAvailable || rows[i].LeaseOwner != "" {
				t.Errorf("%s: state %s owner %q, want available", what, rows[i].State, rows[i].LeaseOwner)
			}
		}
		assertLeased("job of a kind with a TTL", rows[2], "worker-1", start, 2*longTTL, leasetype.ExpiryRetry)
		assertLeased("job of a stuck kind", rows[3], "worker-1", start, longTTL, leasetype.ExpiryStuck)
		if rows[4].State != leasetype.JobStateAvailable {
			t.Errorf("the job past Max is %s, want available", rows[4].State)
		}
		mustClaim(t, exec, claimParams("q", "worker-2", 10, longTTL)) // empty q
		start = mustNow(t, exec)
		assertLeased("job with a TTL of its own", insertLeased(li, claimParams("q", "worker-1", 1, longTTL), own)[0], "worker-1", start, 3*longTTL, leasetype.ExpiryRetry)

		// A schedule in the future, or a paused queue: inserted as
		// JobInsertMany inserts them.
		later := jobParams("k", "q")
		later.ScheduledAt = ptr(mustNow(t, exec).Add(time.Hour))
		if got := insertLeased(li, claimParams("q", "worker-1", 1, longTTL), later)[0]; got.State != leasetype.JobStateScheduled || got.LeaseOwner != "" {
			t.Errorf("job scheduled in an hour: state %s owner %q, want scheduled", got.State, got.LeaseOwner)
		}
		if err := exec.QueueSetPaused(t.Context(), &driver.QueueSetPausedParams{Name: "q", Paused: true}); err != nil {
			t.Fatalf("QueueSetPaused: %v", err)
		}
		paused := insertLeased(li, claimParams("q", "worker-1", 1, longTTL), jobParams("k", "q"))[0]
		if paused.State != leasetype.JobStateAvailable || paused.LeaseOwner != "" {
			t.Errorf("job of a paused queue: state %s owner %q, want available", paused.State, paused.LeaseOwner)
		}
		assertUnchanged(t, exec, "job of a paused queue", paused)
		if err := exec.QueueSetPaused(t.Context(), &driver.QueueSetPausedParams{Name: "q", Paused: false}); err != nil {
			t.Fatalf("QueueSetPaused: %v", err)
		}

		// A unique key held: the holder is returned, untouched.
		p := jobParams("k", "q")
		p.UniqueKey = "held"
		holder := mustInsertOne(t, exec, p)
		results, err := li.JobInsertLeased(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p}}, claimParams("q", "worker-1", 1, longTTL))
		if err != nil {
			t.Fatalf("JobInsertLeased: %v", err)
		}
		if !results[0].UniqueSkipped || results[0].Job.ID != holder.ID {
			t.Errorf("insert of a held key: skipped %v job %d, want the holder %d", results[0].UniqueSkipped, results[0].Job.ID, holder.ID)
		}
		assertUnchanged(t, exec, "holder of the key", holder)

		// In a caller's transaction the lease takes effect at its commit.
		tx, txExec := userTx(t, b, d)
		txLI, ok := txExec.(driver.LeasedInserter)
		if !ok {
			t.Fatalf("the executor in a transaction does not implement driver.LeasedInserter, the pool's does")
		}
		inTx := insertLeased(txLI, claimParams("q", "worker-1", 1, longTTL), jobParams("k", "q"))[0]
		if _, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: inTx.ID}); err == nil {
			t.Errorf("job %d is visible outside its open transaction", inTx.ID)
		}
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		if got := mustGet(t, exec, inTx.ID); got.State != leasetype.JobStateRunning || got.LeaseOwner != "worker-1" || got.LeaseToken != 1 {
			t.Errorf("after the commit the job is %s owner %q token %d, want running for worker-1 with token 1", got.State, got.LeaseOwner, got.LeaseToken)
		}
	})
}
