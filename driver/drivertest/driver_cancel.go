package drivertest

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseCancel specifies cancellation of running jobs: JobCancelRunning,
// JobCancelRequested, and how JobFinish, JobExpire and JobSetState treat a
// job whose cancellation was asked for.
func exerciseCancel[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("RequestOnRunning", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		p := jobParams("k", "q")
		p.UniqueKey = "cancel-me"
		mustInsertOne(t, exec, p)
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))

		before := mustNow(t, exec)
		row, running := mustCancelRunning(t, exec, job.ID)
		after := mustNow(t, exec)
		if !running {
			t.Errorf("JobCancelRunning of a running job: running = false, want true")
		}
		assertWithinPtr(t, "CancelRequestedAt", row.CancelRequestedAt, before, after)
		if row.CancelRequestedAt == nil {
			t.FailNow()
		}
		requested := *row.CancelRequestedAt
		want := *job
		want.CancelRequestedAt = &requested
		assertRowEqual(t, "row returned by JobCancelRunning", row, &want)

		// Every read path carries the request.
		assertUnchanged(t, exec, "JobGet after the request", &want)
		listed := mustList(t, exec, &driver.JobListParams{Queue: "q"})
		if len(listed) != 1 {
			t.Fatalf("JobList: %d jobs, want 1", len(listed))
		}
		assertRowEqual(t, "JobList row after the request", listed[0], &want)
		skipped := mustInsertMany(t, exec, p)[0]
		if !skipped.UniqueSkipped {
			t.Errorf("insert with the running job's key: UniqueSkipped = false, want true")
		}
		assertRowEqual(t, "existing job returned by a unique-skipped insert", skipped.Job, &want)

		// Asking again keeps the first request's time.
		waitPast(t, exec, requested.Add(5*time.Millisecond))
		again, running := mustCancelRunning(t, exec, job.ID)
		if !running || !timesEqual(again.CancelRequestedAt, &requested) {
			t.Errorf("second JobCancelRunning: running %v, CancelRequestedAt %v; want true and the first request's %s", running, again.CancelRequestedAt, requested)
		}

		// The request does not take the lease away: the holder still renews.
		if ids := mustHeartbeat(t, exec, "w", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: longTTL}); len(ids) != 1 {
			t.Errorf("heartbeat after the request renewed %v, want [%d]", ids, job.ID)
		}
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateRunning || !timesEqual(got.CancelRequestedAt, &requested) {
			t.Errorf("after a heartbeat: state %s CancelRequestedAt %v, want running and %s", got.State, got.CancelRequestedAt, requested)
		}
	})

	t.Run("RequestOnOtherStates", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		later := mustNow(t, exec).Add(time.Hour)
		scheduled := jobParams("k", "later")
		scheduled.ScheduledAt = &later
		rows := mustInsert(t, exec, jobParams("k", "wait"), scheduled, jobParams("k", "done"), jobParams("k", "retry"))
		done := mustClaimOne(t, exec, claimParams("done", "w", 1, longTTL))
		mustFinish(t, exec, "w", completeItem(done))
		retry := mustClaimOne(t, exec, claimParams("retry", "w", 1, longTTL))
		mustFinish(t, exec, "w", &driver.JobFinish{ID: retry.ID, Token: retry.LeaseToken, State: leasetype.JobStateRetryable,
			Outcome: leasetype.OutcomeFailed, ScheduledAt: &later, Error: "e", CountError: true})

		for _, id := range jobIDs(rows) {
			stored := mustGet(t, exec, id)
			row, running := mustCancelRunning(t, exec, id)
			if running {
				t.Errorf("JobCancelRunning of a %s job: running = true, want false", stored.State)
			}
			assertRowEqual(t, "row returned for a "+string(stored.State)+" job", row, stored)
			assertUnchanged(t, exec, string(stored.State)+" job after JobCancelRunning", stored)
		}

		_, _, err := exec.JobCancelRunning(t.Context(), &driver.JobCancelRunningParams{ID: rows[len(rows)-1].ID + 1000})
		assertNotFound(t, "JobCancelRunning of a missing ID", err)
	})

	t.Run("RequestedByOwner", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsert(t, exec, jobParams("k", "q1"), jobParams("k", "q1"), jobParams("k", "q1"), jobParams("k", "q2"), jobParams("k", "again"))

		// A job w1 holds with its second token: the ref carries the current one.
		first := mustClaimOne(t, exec, claimParams("again", "w1", 1, longTTL))
		mustFinish(t, exec, "w1", &driver.JobFinish{ID: first.ID, Token: first.LeaseToken, State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased})
		second := mustClaimOne(t, exec, claimParams("again", "w1", 1, longTTL))
		if second.LeaseToken != 2 {
			t.Fatalf("re-claimed job token = %d, want 2", second.LeaseToken)
		}
		w1 := mustClaim(t, exec, claimParams("q1", "w1", 3, longTTL))
		if len(w1) != 3 {
			t.Fatalf("w1 claimed %d jobs, want 3", len(w1))
		}
		w2 := mustClaimOne(t, exec, claimParams("q2", "w2", 1, longTTL))

		if refs := mustCancelRequested(t, exec, "w1"); len(refs) != 0 {
			t.Errorf("JobCancelRequested(w1) before any request = %v, want none", refs)
		}
		for _, j := range []*leasetype.JobRow{second, w1[0], w1[1], w2} {
			mustCancelRunning(t, exec, j.ID)
		}
		// w1[1] completes before it notices: no longer running, not listed.
		assertSameIDs(t, "completed despite the request", mustFinish(t, exec, "w1", completeItem(w1[1])), []int64{w1[1].ID})
		// w1[2] was never asked to cancel.

		assertRefs(t, "JobCancelRequested(w1)", mustCancelRequested(t, exec, "w1"),
			[]driver.LeaseRef{{ID: second.ID, Token: 2}, {ID: w1[0].ID, Token: w1[0].LeaseToken}})
		assertRefs(t, "JobCancelRequested(w2)", mustCancelRequested(t, exec, "w2"),
			[]driver.LeaseRef{{ID: w2.ID, Token: w2.LeaseToken}})
		assertRefs(t, "JobCancelRequested(w3)", mustCancelRequested(t, exec, "w3"), nil)
	})

	for _, tc := range []struct {
		state   leasetype.JobState
		outcome leasetype.AttemptOutcome
	}{
		{leasetype.JobStateRetryable, leasetype.OutcomeFailed},
		{leasetype.JobStateAvailable, leasetype.OutcomeReleased},
		{leasetype.JobStateScheduled, leasetype.OutcomeSnoozed},
	} {
		t.Run("Finish"+title(string(tc.state))+"BecomesCancelled", func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			mustInsertOne(t, exec, jobParams("k", "q"))
			job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
			mustCancelRunning(t, exec, job.ID)

			// ScheduledAt nil means now: had the job not become cancelled,
			// it would be claimable at once.
			before := mustNow(t, exec)
			ids := mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: tc.state,
				Outcome: tc.outcome, Error: "boom", CountError: tc.state == leasetype.JobStateRetryable})
			after := mustNow(t, exec)
			assertSameIDs(t, "written", ids, []int64{job.ID})

			got := mustGet(t, exec, job.ID)
			if got.State != leasetype.JobStateCancelled {
				t.Errorf("state after finishing as %s with a cancel request = %s, want cancelled", tc.state, got.State)
			}
			assertWithinPtr(t, "FinalizedAt", got.FinalizedAt, before, after)
			attempts := mustAttempts(t, exec, job.ID)
			if len(attempts) != 1 {
				t.Fatalf("attempt rows = %d, want 1", len(attempts))
			}
			if a := attempts[0]; a.Outcome != leasetype.OutcomeCancelled || a.Error != "boom" || a.Token != job.LeaseToken {
				t.Errorf("attempt row: outcome %s error %q token %d, want cancelled \"boom\" %d", a.Outcome, a.Error, a.Token, job.LeaseToken)
			}
			if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
				t.Errorf("claimed a job whose cancellation was asked for: %s", describeJobs(claimed))
			}
			if refs := mustCancelRequested(t, exec, "w"); len(refs) != 0 {
				t.Errorf("JobCancelRequested(w) after the finish = %v, want none", refs)
			}
		})
	}

	// A plain completion (no error text) is the success path, which a
	// driver may write with a statement of its own: it must stand too.
	for _, tc := range []struct {
		name    string
		state   leasetype.JobState
		outcome leasetype.AttemptOutcome
		err     string
	}{
		{"Completed", leasetype.JobStateCompleted, leasetype.OutcomeCompleted, "e"},
		{"CompletedPlain", leasetype.JobStateCompleted, leasetype.OutcomeCompleted, ""},
		{"Discarded", leasetype.JobStateDiscarded, leasetype.OutcomeFailed, "e"},
		{"Cancelled", leasetype.JobStateCancelled, leasetype.OutcomeCancelled, "e"},
	} {
		t.Run("Finish"+tc.name+"Stands", func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			mustInsertOne(t, exec, jobParams("k", "q"))
			job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
			mustCancelRunning(t, exec, job.ID)
			ids := mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: tc.state, Outcome: tc.outcome, Error: tc.err})
			assertSameIDs(t, "written", ids, []int64{job.ID})
			if got := mustGet(t, exec, job.ID); got.State != tc.state || got.FinalizedAt == nil {
				t.Errorf("state after finishing as %s with a cancel request = %s (finalized %v), want %s", tc.state, got.State, got.FinalizedAt, tc.state)
			}
			if a := mustAttempts(t, exec, job.ID); len(a) != 1 || a[0].Outcome != tc.outcome {
				t.Errorf("attempt rows = %+v, want one with outcome %s", a, tc.outcome)
			}
		})
	}

	t.Run("FinishStaleTokenOnRequestedJob", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		a, bJob := leaseLost(t, exec, "q")
		row, running := mustCancelRunning(t, exec, bJob.ID)
		if !running {
			t.Fatalf("JobCancelRunning of the re-claimed job: running = false")
		}
		// The old holder's write is fenced out as any other.
		if ids := mustFinish(t, exec, "worker-a", &driver.JobFinish{ID: a.ID, Token: a.LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "late"}); len(ids) != 0 {
			t.Errorf("stale finish of a requested job wrote %v, want nothing", ids)
		}
		assertUnchanged(t, exec, "job still leased to worker-b", row)
		ids := mustFinish(t, exec, "worker-b", &driver.JobFinish{ID: bJob.ID, Token: bJob.LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "e"})
		assertSameIDs(t, "current holder's finish", ids, []int64{bJob.ID})
		if got := mustGet(t, exec, bJob.ID); got.State != leasetype.JobStateCancelled {
			t.Errorf("state = %s, want cancelled", got.State)
		}
	})

	for _, stuck := range []bool{false, true} {
		name := "ExpireRetryPolicyBecomesCancelled"
		if stuck {
			name = "ExpireStuckPolicyBecomesCancelled"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			mustInsertOne(t, exec, jobParams("charge", "q"))
			p := claimParams("q", "w", 1, longTTL)
			if stuck {
				p.StuckKinds = []string{"charge"}
			}
			job := mustClaimOne(t, exec, p)
			mustCancelRunning(t, exec, job.ID)
			job = shortenLease(t, exec, job)
			waitLeaseExpired(t, exec, job)

			before := mustNow(t, exec)
			got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
			after := mustNow(t, exec)
			if len(got) != 1 || got[0].ID != job.ID {
				t.Fatalf("JobExpire returned %s, want job %d", describeJobs(got), job.ID)
			}
			if got[0].State != leasetype.JobStateCancelled {
				t.Errorf("expired job with a cancel request: state %s, want cancelled", got[0].State)
			}
			assertWithinPtr(t, "FinalizedAt", got[0].FinalizedAt, before, after)
			if got[0].CancelRequestedAt == nil {
				t.Errorf("JobExpire's row has no CancelRequestedAt")
			}
			assertRowEqual(t, "stored job vs JobExpire's row", mustGet(t, exec, job.ID), got[0])
			attempts := mustAttempts(t, exec, job.ID)
			if len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeLeaseExpired || attempts[0].Token != job.LeaseToken {
				t.Errorf("attempt rows = %+v, want one lease_expired row for token %d", attempts, job.LeaseToken)
			}
			if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
				t.Errorf("claimed a job whose cancellation was asked for: %s", describeJobs(claimed))
			}
		})
	}

	t.Run("RetryClearsRequest", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		mustCancelRunning(t, exec, job.ID)
		mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "e"})
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateCancelled {
			t.Fatalf("state = %s, want cancelled", got.State)
		}

		row, changed, err := exec.JobSetState(t.Context(), &driver.JobSetStateParams{
			ID: job.ID, FromStates: []leasetype.JobState{leasetype.JobStateCancelled}, State: leasetype.JobStateAvailable, ResetErrors: true,
		})
		if err != nil {
			t.Fatalf("JobSetState: %v", err)
		}
		if !changed || row.State != leasetype.JobStateAvailable || row.CancelRequestedAt != nil {
			t.Errorf("retry: changed %v state %s CancelRequestedAt %v, want true available nil", changed, row.State, row.CancelRequestedAt)
		}
		assertRowEqual(t, "stored row vs JobSetState's row", mustGet(t, exec, job.ID), row)

		again := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		if again.ID != job.ID || again.CancelRequestedAt != nil {
			t.Errorf("claim after the retry: job %d CancelRequestedAt %v, want job %d with no request", again.ID, again.CancelRequestedAt, job.ID)
		}
		// With the request cleared, a failure is a plain retry again.
		mustFinish(t, exec, "w", &driver.JobFinish{ID: again.ID, Token: again.LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "e2"})
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateRetryable {
			t.Errorf("state after a failure following the retry = %s, want retryable", got.State)
		}
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 2 || attempts[0].Outcome != leasetype.OutcomeCancelled || attempts[1].Outcome != leasetype.OutcomeFailed {
			t.Errorf("attempt outcomes = %v, want [cancelled failed]", outcomesOf(attempts))
		}
	})
}

func mustCancelRunning(t *testing.T, exec driver.Executor, id int64) (*leasetype.JobRow, bool) {
	t.Helper()
	row, running, err := exec.JobCancelRunning(t.Context(), &driver.JobCancelRunningParams{ID: id})
	if err != nil {
		t.Fatalf("JobCancelRunning(%d): %v", id, err)
	}
	if row == nil || row.ID != id {
		t.Fatalf("JobCancelRunning(%d): returned row %v", id, row)
	}
	return row, running
}

func mustCancelRequested(t *testing.T, exec driver.Executor, owner string) []driver.LeaseRef {
	t.Helper()
	refs, err := exec.JobCancelRequested(t.Context(), &driver.JobCancelRequestedParams{Owner: owner})
	if err != nil {
		t.Fatalf("JobCancelRequested(%q): %v", owner, err)
	}
	return refs
}

// assertRefs compares two sets of lease references, ignoring order.
func assertRefs(t *testing.T, what string, got, want []driver.LeaseRef) {
	t.Helper()
	byID := func(a, b driver.LeaseRef) int { return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Token, b.Token)) }
	g, w := slices.Clone(got), slices.Clone(want)
	slices.SortFunc(g, byID)
	slices.SortFunc(w, byID)
	if !slices.Equal(g, w) {
		t.Errorf("%s = %v, want %v", what, g, w)
	}
}

func outcomesOf(attempts []*leasetype.AttemptRow) []leasetype.AttemptOutcome {
	out := make([]leasetype.AttemptOutcome, len(attempts))
	for i, a := range attempts {
		out[i] = a.Outcome
	}
	return out
}
