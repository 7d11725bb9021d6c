package drivertest

import (
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseFinish specifies JobFinish: each new state, the attempt row, and
// the fencing of stale tokens.
func exerciseFinish[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("CompletedWritesAttempt", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "worker-1", 1, longTTL))
		waitPast(t, exec, job.LeasedAt.Add(5*time.Millisecond))
		mustHeartbeat(t, exec, "worker-1", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: longTTL})
		renewed := mustGet(t, exec, job.ID)

		before := mustNow(t, exec)
		ids := mustFinish(t, exec, "worker-1", completeItem(job))
		after := mustNow(t, exec)
		assertSameIDs(t, "finished", ids, []int64{job.ID})

		got := mustGet(t, exec, job.ID)
		if got.State != leasetype.JobStateCompleted {
			t.Errorf("State = %s, want completed", got.State)
		}
		assertWithinPtr(t, "FinalizedAt", got.FinalizedAt, before, after)
		if got.LeaseToken != job.LeaseToken || got.Attempt != job.Attempt || got.Errors != 0 || got.LastError != "" {
			t.Errorf("token %d attempt %d errors %d last error %q, want %d %d 0 \"\"",
				got.LeaseToken, got.Attempt, got.Errors, got.LastError, job.LeaseToken, job.Attempt)
		}

		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 {
			t.Fatalf("attempt rows = %d, want 1", len(attempts))
		}
		a := attempts[0]
		if a.JobID != job.ID || a.Attempt != 1 || a.Token != job.LeaseToken || a.Owner != "worker-1" ||
			a.Heartbeats != 1 || a.Outcome != leasetype.OutcomeCompleted || a.Error != "" {
			t.Errorf("attempt row = %+v, want job %d attempt 1 token %d owner worker-1 heartbeats 1 outcome completed, no error",
				*a, job.ID, job.LeaseToken)
		}
		assertNear(t, "attempt LeasedAt", a.LeasedAt, *job.LeasedAt, 0)
		assertNear(t, "attempt LeaseUntil", a.LeaseUntil, *renewed.LeaseUntil, 0)
		if !timesEqual(a.LastHeartbeatAt, renewed.HeartbeatAt) {
			t.Errorf("attempt LastHeartbeatAt = %v, want the job's HeartbeatAt %v", a.LastHeartbeatAt, renewed.HeartbeatAt)
		}
		assertWithin(t, "attempt FinishedAt", a.FinishedAt, before, after)

		if again := mustFinish(t, exec, "worker-1", completeItem(job)); len(again) != 0 {
			t.Errorf("second finish with the same token wrote %v, want nothing", again)
		}
		if n := len(mustAttempts(t, exec, job.ID)); n != 1 {
			t.Errorf("attempt rows after a repeated finish = %d, want 1", n)
		}
	})

	t.Run("AttemptWithoutHeartbeat", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		mustFinish(t, exec, "w", completeItem(job))
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 {
			t.Fatalf("attempt rows = %d, want 1", len(attempts))
		}
		if a := attempts[0]; a.Heartbeats != 0 || a.LastHeartbeatAt != nil {
			t.Errorf("attempt heartbeats %d, last heartbeat %v; want 0 and nil", a.Heartbeats, a.LastHeartbeatAt)
		}
	})

	t.Run("StaleTokenWritesNothing", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		a, bJob := leaseLost(t, exec, "q")
		expiredAttempts := mustAttempts(t, exec, a.ID)
		if len(expiredAttempts) != 1 || expiredAttempts[0].Outcome != leasetype.OutcomeLeaseExpired || expiredAttempts[0].Token != a.LeaseToken {
			t.Fatalf("attempts after expiry = %+v, want one lease_expired row for token %d", expiredAttempts, a.LeaseToken)
		}

		// Worker A wakes up and tries to finish and to renew its lost lease.
		for _, state := range []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateRetryable, leasetype.JobStateCancelled} {
			item := &driver.JobFinish{ID: a.ID, Token: a.LeaseToken, State: state, Outcome: leasetype.OutcomeFailed, Error: "late", CountError: true}
			if ids := mustFinish(t, exec, "worker-a", item); len(ids) != 0 {
				t.Errorf("stale finish to %s wrote %v, want nothing", state, ids)
			}
		}
		if ids := mustHeartbeat(t, exec, "worker-a", driver.LeaseRenewal{ID: a.ID, Token: a.LeaseToken, TTL: longTTL}); len(ids) != 0 {
			t.Errorf("stale heartbeat renewed %v, want nothing", ids)
		}
		assertUnchanged(t, exec, "job leased to worker-b", bJob)
		if n := len(mustAttempts(t, exec, a.ID)); n != 1 {
			t.Errorf("attempt rows after stale writes = %d, want 1", n)
		}

		// Worker B, the current holder, completes.
		assertSameIDs(t, "worker-b's completion", mustFinish(t, exec, "worker-b", completeItem(bJob)), []int64{bJob.ID})
		if got := mustGet(t, exec, bJob.ID); got.State != leasetype.JobStateCompleted {
			t.Errorf("State = %s, want completed", got.State)
		}
		attempts := mustAttempts(t, exec, a.ID)
		if len(attempts) != 2 {
			t.Fatalf("attempt rows = %d, want 2", len(attempts))
		}
		if last := attempts[1]; last.Token != bJob.LeaseToken || last.Owner != "worker-b" || last.Outcome != leasetype.OutcomeCompleted || last.Attempt != bJob.Attempt {
			t.Errorf("second attempt = %+v, want token %d owner worker-b attempt %d completed", *last, bJob.LeaseToken, bJob.Attempt)
		}
	})

	t.Run("ExpiredLeaseWritesNothing", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, shortTTL))
		waitLeaseExpired(t, exec, job)
		if ids := mustFinish(t, exec, "w", completeItem(job)); len(ids) != 0 {
			t.Errorf("finish after the lease expired (not yet reclaimed) wrote %v, want nothing", ids)
		}
		assertUnchanged(t, exec, "job with an expired lease", job)
		if n := len(mustAttempts(t, exec, job.ID)); n != 0 {
			t.Errorf("attempt rows = %d, want 0", n)
		}
	})

	t.Run("Retryable", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		at := mustNow(t, exec).Add(time.Hour)
		ids := mustFinish(t, exec, "w", &driver.JobFinish{
			ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateRetryable,
			Outcome: leasetype.OutcomeFailed, ScheduledAt: &at, Error: "psp timeout", CountError: true,
		})
		assertSameIDs(t, "finished", ids, []int64{job.ID})
		got := mustGet(t, exec, job.ID)
		if got.State != leasetype.JobStateRetryable || got.Errors != 1 || got.LastError != "psp timeout" || got.Expiries != 0 {
			t.Errorf("state %s errors %d last error %q expiries %d, want retryable 1 \"psp timeout\" 0", got.State, got.Errors, got.LastError, got.Expiries)
		}
		assertNear(t, "ScheduledAt", got.ScheduledAt, at, time.Millisecond)
		if got.FinalizedAt != nil {
			t.Errorf("FinalizedAt = %v for a retryable job, want nil", got.FinalizedAt)
		}
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeFailed || attempts[0].Error != "psp timeout" {
			t.Errorf("attempts = %+v, want one failed row with the error", attempts)
		}
		if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
			t.Errorf("claimed a retryable job before its ScheduledAt: %s", describeJobs(claimed))
		}
	})

	t.Run("RetryableNowIsClaimable", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		before := mustNow(t, exec)
		mustFinish(t, exec, "w", &driver.JobFinish{
			ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateRetryable,
			Outcome: leasetype.OutcomePanicked, Error: "panic: boom", CountError: true,
		})
		after := mustNow(t, exec)
		got := mustGet(t, exec, job.ID)
		assertWithin(t, "ScheduledAt (nil means now)", got.ScheduledAt, before, after)
		again := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		if again.Attempt != 2 || again.LeaseToken != job.LeaseToken+1 || again.Errors != 1 {
			t.Errorf("re-claim: attempt %d token %d errors %d, want 2 %d 1", again.Attempt, again.LeaseToken, job.LeaseToken+1, again.Errors)
		}
		// A completion without an error keeps the last failure's text.
		mustFinish(t, exec, "w", completeItem(again))
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateCompleted || got.Errors != 1 || got.LastError != "panic: boom" {
			t.Errorf("after completing: state %s errors %d last error %q, want completed 1 \"panic: boom\"", got.State, got.Errors, got.LastError)
		}
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 2 || attempts[0].Outcome != leasetype.OutcomePanicked || attempts[1].Outcome != leasetype.OutcomeCompleted || attempts[1].Error != "" {
			t.Errorf("attempts = %+v, want panicked then completed without error", attempts)
		}
	})

	t.Run("ErrorWithoutCount", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		at := mustNow(t, exec).Add(time.Hour)
		mustFinish(t, exec, "w", &driver.JobFinish{
			ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateRetryable,
			Outcome: leasetype.OutcomeFailed, ScheduledAt: &at, Error: "not counted",
		})
		got := mustGet(t, exec, job.ID)
		if got.Errors != 0 || got.LastError != "not counted" {
			t.Errorf("errors %d last error %q, want 0 and \"not counted\"", got.Errors, got.LastError)
		}
	})

	t.Run("SnoozedIsScheduled", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		at := mustNow(t, exec).Add(time.Second)
		ids := mustFinish(t, exec, "w", &driver.JobFinish{
			ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateScheduled, Outcome: leasetype.OutcomeSnoozed, ScheduledAt: &at,
		})
		assertSameIDs(t, "finished", ids, []int64{job.ID})
		got := mustGet(t, exec, job.ID)
		if got.State != leasetype.JobStateScheduled || got.Errors != 0 || got.FinalizedAt != nil {
			t.Errorf("state %s errors %d finalized %v, want scheduled 0 nil", got.State, got.Errors, got.FinalizedAt)
		}
		assertNear(t, "ScheduledAt", got.ScheduledAt, at, time.Millisecond)
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeSnoozed {
			t.Errorf("attempts = %+v, want one snoozed row", attempts)
		}
		if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
			t.Errorf("claimed a snoozed job early: %s", describeJobs(claimed))
		}
		waitPast(t, exec, at)
		again := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		if again.Attempt != 2 || again.LeaseToken != 2 {
			t.Errorf("claim after snooze: attempt %d token %d, want 2 2", again.Attempt, again.LeaseToken)
		}
	})

	t.Run("ReleasedIsAvailable", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		before := mustNow(t, exec)
		mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased})
		after := mustNow(t, exec)
		got := mustGet(t, exec, job.ID)
		if got.State != leasetype.JobStateAvailable || got.Errors != 0 || got.Expiries != 0 || got.FinalizedAt != nil {
			t.Errorf("state %s errors %d expiries %d finalized %v, want available 0 0 nil", got.State, got.Errors, got.Expiries, got.FinalizedAt)
		}
		assertWithin(t, "ScheduledAt", got.ScheduledAt, before, after)
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeReleased {
			t.Errorf("attempts = %+v, want one released row", attempts)
		}
		mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
	})

	for _, tc := range []struct {
		state   leasetype.JobState
		outcome leasetype.AttemptOutcome
	}{
		{leasetype.JobStateCancelled, leasetype.OutcomeCancelled},
		{leasetype.JobStateDiscarded, leasetype.OutcomeFailed},
	} {
		t.Run("Final"+title(string(tc.state)), func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			mustInsertOne(t, exec, jobParams("k", "q"))
			job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
			before := mustNow(t, exec)
			ids := mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: tc.state, Outcome: tc.outcome, Error: "final", CountError: tc.state == leasetype.JobStateDiscarded})
			after := mustNow(t, exec)
			assertSameIDs(t, "finished", ids, []int64{job.ID})
			got := mustGet(t, exec, job.ID)
			if got.State != tc.state || got.LastError != "final" {
				t.Errorf("state %s last error %q, want %s \"final\"", got.State, got.LastError, tc.state)
			}
			assertWithinPtr(t, "FinalizedAt", got.FinalizedAt, before, after)
			attempts := mustAttempts(t, exec, job.ID)
			if len(attempts) != 1 || attempts[0].Outcome != tc.outcome || attempts[0].Error != "final" {
				t.Errorf("attempts = %+v, want one %s row with the error", attempts, tc.outcome)
			}
			if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
				t.Errorf("claimed a %s job: %s", tc.state, describeJobs(claimed))
			}
		})
	}

	t.Run("MixedBatch", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		a, bJob := leaseLost(t, exec, "lost")
		mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"), jobParams("k", "q"))
		live := mustClaim(t, exec, claimParams("q", "w", 3, longTTL))
		if len(live) != 3 {
			t.Fatalf("claimed %d jobs, want 3", len(live))
		}
		at := mustNow(t, exec).Add(time.Hour)
		ids := mustFinish(t, exec, "w",
			completeItem(live[0]),
			completeItem(a), // stale
			&driver.JobFinish{ID: live[1].ID, Token: live[1].LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, ScheduledAt: &at, Error: "e", CountError: true},
			&driver.JobFinish{ID: live[2].ID, Token: live[2].LeaseToken + 1, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}, // wrong token
		)
		assertSameIDs(t, "written", ids, []int64{live[0].ID, live[1].ID})
		if got := mustGet(t, exec, live[0].ID); got.State != leasetype.JobStateCompleted {
			t.Errorf("good item 1: state %s, want completed", got.State)
		}
		if got := mustGet(t, exec, live[1].ID); got.State != leasetype.JobStateRetryable || got.Errors != 1 {
			t.Errorf("good item 2: state %s errors %d, want retryable 1", got.State, got.Errors)
		}
		assertUnchanged(t, exec, "stale item's job", bJob)
		assertUnchanged(t, exec, "wrong-token item's job", live[2])
		for i, want := range []int{1, 1, 0} {
			if n := len(mustAttempts(t, exec, live[i].ID)); n != want {
				t.Errorf("job %d: attempt rows = %d, want %d", live[i].ID, n, want)
			}
		}
		if n := len(mustAttempts(t, exec, a.ID)); n != 1 {
			t.Errorf("stale job: attempt rows = %d, want 1 (the expiry only)", n)
		}
	})

	t.Run("ManyAtOnce", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		var params []*driver.JobInsertParams
		for range 50 {
			params = append(params, jobParams("k", "q"))
		}
		mustInsert(t, exec, params...)
		jobs := mustClaim(t, exec, claimParams("q", "w", 50, longTTL))
		var items []*driver.JobFinish
		for _, j := range jobs {
			items = append(items, completeItem(j))
		}
		assertSameIDs(t, "written", mustFinish(t, exec, "w", items...), jobIDs(jobs))
		if n := countJobs(t, exec, driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateCompleted}}); n != 50 {
			t.Errorf("completed jobs = %d, want 50", n)
		}
		for _, j := range jobs {
			if n := len(mustAttempts(t, exec, j.ID)); n != 1 {
				t.Errorf("job %d: attempt rows = %d, want 1", j.ID, n)
			}
		}
	})

	t.Run("ConcurrentFinishWritesOnce", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const jobs, racers = 20, 4
		var params []*driver.JobInsertParams
		for range jobs {
			params = append(params, jobParams("k", "q"))
		}
		mustInsert(t, exec, params...)
		claimed := mustClaim(t, exec, claimParams("q", "w", jobs, longTTL))
		if len(claimed) != jobs {
			t.Fatalf("claimed %d jobs, want %d", len(claimed), jobs)
		}
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			written = map[int64]int{}
			errs    = make(chan error, racers)
			start   = make(chan struct{})
		)
		for r := range racers {
			wg.Go(func() {
				<-start
				for i := range claimed {
					j := claimed[(i+r*5)%len(claimed)]
					// Half the racers complete, half fail: only one may win.
					item := completeItem(j)
					if r%2 == 1 {
						item = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "e", CountError: true}
					}
					ids, err := exec.JobFinish(t.Context(), &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{item}})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for _, id := range ids {
						written[id]++
					}
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("JobFinish: %v", err)
		}
		for _, j := range claimed {
			if written[j.ID] != 1 {
				t.Errorf("job %d: finish written %d times, want 1", j.ID, written[j.ID])
			}
			attempts := mustAttempts(t, exec, j.ID)
			got := mustGet(t, exec, j.ID)
			if len(attempts) != 1 || got.Errors > 1 {
				t.Errorf("job %d: %d attempt rows, errors %d; want 1 row and at most 1 error", j.ID, len(attempts), got.Errors)
			}
		}
	})

	t.Run("InUserTxRolledBack", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		tx, txExec := userTx(t, b, d)
		assertSameIDs(t, "finished in the transaction", mustFinish(t, txExec, "w", completeItem(job)), []int64{job.ID})
		if got := mustGet(t, txExec, job.ID); got.State != leasetype.JobStateCompleted {
			t.Errorf("inside the transaction: state %s, want completed", got.State)
		}
		if err := b.RollbackTx(t.Context(), tx); err != nil {
			t.Fatalf("RollbackTx: %v", err)
		}
		assertUnchanged(t, exec, "job after the rollback", job)
		if n := len(mustAttempts(t, exec, job.ID)); n != 0 {
			t.Errorf("attempt rows after the rollback = %d, want 0", n)
		}
		// The lease is still live: the worker can complete outside.
		assertSameIDs(t, "finished after the rollback", mustFinish(t, exec, "w", completeItem(job)), []int64{job.ID})
	})

	t.Run("InUserTxCommitted", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		tx, txExec := userTx(t, b, d)
		other := mustInsertOne(t, txExec, jobParams("follow-up", "q2")) // the business write's companion
		assertSameIDs(t, "finished in the transaction", mustFinish(t, txExec, "w", completeItem(job)), []int64{job.ID})
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateCompleted {
			t.Errorf("after commit: state %s, want completed", got.State)
		}
		if n := len(mustAttempts(t, exec, job.ID)); n != 1 {
			t.Errorf("attempt rows after commit = %d, want 1", n)
		}
		mustGet(t, exec, other.ID)
	})

	t.Run("InUserTxAfterExpiryWritesNothing", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, shortTTL))
		claimed := time.Now()
		// The transaction starts while the lease is live (a handler's
		// business transaction) and ends after it has expired: the lease
		// check must use the time of the write, not of the transaction's start.
		tx, txExec := userTx(t, b, d)
		mustGet(t, txExec, job.ID)
		// Only the transaction's executor may be used while it is open (one
		// SQLite connection may be all there is), so wait on the local
		// monotonic clock: the lease ends at most shortTTL after the claim.
		time.Sleep(time.Until(claimed.Add(shortTTL + 100*time.Millisecond)))
		if ids := mustHeartbeat(t, txExec, "w", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: longTTL}); len(ids) != 0 {
			t.Errorf("heartbeat in a transaction after the lease expired renewed %v, want nothing", ids)
		}
		if ids := mustFinish(t, txExec, "w", completeItem(job)); len(ids) != 0 {
			t.Errorf("finish in a transaction after the lease expired wrote %v, want nothing", ids)
		}
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		assertUnchanged(t, exec, "job with the expired lease", job)
		if n := len(mustAttempts(t, exec, job.ID)); n != 0 {
			t.Errorf("attempt rows = %d, want 0", n)
		}
	})

	t.Run("InUserTxStaleTokenWritesNothing", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		a, bJob := leaseLost(t, exec, "q")
		tx, txExec := userTx(t, b, d)
		if ids := mustFinish(t, txExec, "worker-a", completeItem(a)); len(ids) != 0 {
			t.Errorf("stale finish in a transaction wrote %v, want nothing", ids)
		}
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		assertUnchanged(t, exec, "job leased to worker-b", bJob)
	})

	t.Run("FinishAndClaim", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		fc, ok := exec.(driver.FinishClaimer)
		if !ok {
			t.Skip("the executor does not implement driver.FinishClaimer")
		}
		mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"), jobParams("k", "q"), jobParams("k", "other"))
		done := mustClaimOne(t, exec, claimParams("q", "worker-1", 1, longTTL))
		foreign := mustClaimOne(t, exec, claimParams("q", "worker-2", 1, longTTL))
		stale := *foreign
		stale.LeaseToken--
		written, claimed, err := fc.JobFinishAndClaim(t.Context(), &driver.JobFinishParams{
			Owner: "worker-1",
			Items: []*driver.JobFinish{completeItem(done), completeItem(foreign), completeItem(&stale)},
		}, claimParams("q", "worker-1", 5, longTTL))
		if err != nil {
			t.Fatalf("JobFinishAndClaim: %v", err)
		}
		// Fencing holds: only the lease worker-1 holds with its token ends.
		assertSameIDs(t, "finished", written, []int64{done.ID})
		if got := mustGet(t, exec, done.ID); got.State != leasetype.JobStateCompleted {
			t.Errorf("finished job state = %s, want completed", got.State)
		}
		if n := len(mustAttempts(t, exec, done.ID)); n != 1 {
			t.Errorf("attempt rows of the finished job = %d, want 1", n)
		}
		assertUnchanged(t, exec, "job leased to worker-2", foreign)
		// The claim leased the one claimable job left in q, to worker-1.
		if len(claimed) != 1 {
			t.Fatalf("claimed %d jobs, want 1", len(claimed))
		}
		c := claimed[0]
		if c.ID == done.ID || c.ID == foreign.ID || c.Queue != "q" || c.State != leasetype.JobStateRunning || c.LeaseOwner != "worker-1" || c.LeaseUntil == nil {
			t.Errorf("claimed job %d queue %s state %s owner %q, want another job of q running for worker-1 with a lease", c.ID, c.Queue, c.State, c.LeaseOwner)
		}
		if got := mustGet(t, exec, c.ID); got.State != leasetype.JobStateRunning || got.LeaseToken != c.LeaseToken {
			t.Errorf("claimed job reads back state %s token %d, want running %d", got.State, got.LeaseToken, c.LeaseToken)
		}

		// Nothing to claim: the outcomes are written all the same.
		written, claimed, err = fc.JobFinishAndClaim(t.Context(), &driver.JobFinishParams{
			Owner: "worker-1", Items: []*driver.JobFinish{completeItem(c)},
		}, claimParams("q", "worker-1", 5, longTTL))
		if err != nil {
			t.Fatalf("JobFinishAndClaim on an empty queue: %v", err)
		}
		assertSameIDs(t, "finished", written, []int64{c.ID})
		if len(claimed) != 0 {
			t.Errorf("claimed %d jobs from an empty queue, want 0", len(claimed))
		}
	})

	t.Run("AttemptsAndClaim", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		ac, ok := exec.(driver.AttemptsClaimer)
		if !ok {
			t.Skip("the executor does not implement driver.AttemptsClaimer")
		}
		mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"), jobParams("k", "q"))
		done := mustClaimOne(t, exec, claimParams("q", "worker-1", 1, longTTL))
		running := mustClaimOne(t, exec, claimParams("q", "worker-1", 1, longTTL))
		mustFinish(t, exec, "worker-1", completeItem(done))
		found, claimed, err := ac.JobAttemptsAndClaim(t.Context(), &driver.JobAttemptsParams{Leases: []driver.LeaseRef{
			{ID: done.ID, Token: done.LeaseToken}, {ID: running.ID, Token: running.LeaseToken}, {ID: done.ID, Token: done.LeaseToken + 1},
		}}, claimParams("q", "worker-1", 5, longTTL))
		if err != nil {
			t.Fatalf("JobAttemptsAndClaim: %v", err)
		}
		// The read names only the lease that ended, by its own token.
		if len(found) != 1 || found[0].JobID != done.ID || found[0].Token != done.LeaseToken || found[0].Outcome != leasetype.OutcomeCompleted || found[0].Owner != "worker-1" {
			t.Fatalf("attempts read = %+v, want the one completed attempt of job %d token %d", found, done.ID, done.LeaseToken)
		}
		// The claim leased the one claimable job left.
		if len(claimed) != 1 || claimed[0].ID == done.ID || claimed[0].ID == running.ID || claimed[0].State != leasetype.JobStateRunning || claimed[0].LeaseOwner != "worker-1" {
			t.Fatalf("claimed %+v, want the third job of q running for worker-1", claimed)
		}
		if got := mustGet(t, exec, claimed[0].ID); got.State != leasetype.JobStateRunning || got.LeaseToken != claimed[0].LeaseToken {
			t.Errorf("claimed job reads back state %s token %d, want running %d", got.State, got.LeaseToken, claimed[0].LeaseToken)
		}
		// Nothing to claim: the read is answered all the same.
		found, claimed, err = ac.JobAttemptsAndClaim(t.Context(), &driver.JobAttemptsParams{Leases: []driver.LeaseRef{{ID: done.ID, Token: done.LeaseToken}}},
			claimParams("q", "worker-1", 5, longTTL))
		if err != nil {
			t.Fatalf("JobAttemptsAndClaim on an empty queue: %v", err)
		}
		if len(found) != 1 || len(claimed) != 0 {
			t.Errorf("on an empty queue: %d attempts, %d claimed; want 1 and 0", len(found), len(claimed))
		}
	})
}
