package drivertest

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseAdmin specifies the operator's reads and writes: JobGet, JobList,
// JobAttempts, JobSetState and JobCountByState.
func exerciseAdmin[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	deadStates := []leasetype.JobState{leasetype.JobStateDiscarded, leasetype.JobStateCancelled, leasetype.JobStateStuck}

	setState := func(t *testing.T, exec driver.Executor, p *driver.JobSetStateParams) (*leasetype.JobRow, bool) {
		t.Helper()
		row, changed, err := exec.JobSetState(t.Context(), p)
		if err != nil {
			t.Fatalf("JobSetState(%d to %s): %v", p.ID, p.State, err)
		}
		if row == nil || row.ID != p.ID {
			t.Fatalf("JobSetState(%d): returned row %v", p.ID, row)
		}
		return row, changed
	}

	t.Run("GetNotFound", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		job := mustInsertOne(t, exec, jobParams("k", "q"))
		_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: job.ID + 1000})
		assertNotFound(t, "JobGet of a missing ID", err)
	})

	// A cancelled job gave up its unique key, and a newer job took it:
	// moving the cancelled one back to a state that holds keys must fail
	// with ErrUniqueConflict and change nothing.
	t.Run("SetStateUniqueConflict", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		first := jobParams("k", "q")
		first.UniqueKey = "order-7"
		old := mustInsertOne(t, exec, first)
		setState(t, exec, &driver.JobSetStateParams{ID: old.ID, FromStates: []leasetype.JobState{leasetype.JobStateAvailable}, State: leasetype.JobStateCancelled})
		second := jobParams("k", "q")
		second.UniqueKey = "order-7"
		res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{second}})
		if err != nil || res[0].UniqueSkipped {
			t.Fatalf("insert with the released key: %+v, %v; want inserted", res, err)
		}
		_, _, err = exec.JobSetState(t.Context(), &driver.JobSetStateParams{ID: old.ID, FromStates: deadStates, State: leasetype.JobStateAvailable, ResetErrors: true})
		if !errors.Is(err, driver.ErrUniqueConflict) {
			t.Fatalf("retry of the cancelled job: %v, want ErrUniqueConflict", err)
		}
		if row := mustGet(t, exec, old.ID); row.State != leasetype.JobStateCancelled {
			t.Fatalf("the cancelled job is %s after the refused retry, want cancelled", row.State)
		}
	})

	t.Run("RetryDiscarded", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: "dead", CountError: true})

		before := mustNow(t, exec)
		row, changed := setState(t, exec, &driver.JobSetStateParams{ID: job.ID, FromStates: deadStates, State: leasetype.JobStateAvailable, ResetErrors: true, Note: "retried by ops"})
		after := mustNow(t, exec)
		if !changed {
			t.Fatalf("changed = false, want true")
		}
		if row.State != leasetype.JobStateAvailable || row.Errors != 0 || row.Expiries != 0 || row.LastError != "retried by ops" {
			t.Errorf("row: state %s errors %d expiries %d last error %q, want available 0 0 \"retried by ops\"", row.State, row.Errors, row.Expiries, row.LastError)
		}
		assertWithin(t, "ScheduledAt (available means now)", row.ScheduledAt, before, after)
		assertRowEqual(t, "stored row vs returned row", mustGet(t, exec, job.ID), row)
		again := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		if again.Attempt != 2 || again.LeaseToken != job.LeaseToken+1 {
			t.Errorf("claim after retry: attempt %d token %d, want 2 %d", again.Attempt, again.LeaseToken, job.LeaseToken+1)
		}
	})

	t.Run("RetryStuck", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("charge", "q"))
		p := claimParams("q", "w", 1, shortTTL)
		p.StuckKinds = []string{"charge"}
		job := mustClaimOne(t, exec, p)
		waitLeaseExpired(t, exec, job)
		if got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(got) != 1 || got[0].State != leasetype.JobStateStuck {
			t.Fatalf("JobExpire: got %s, want the job stuck", describeJobs(got))
		}
		row, changed := setState(t, exec, &driver.JobSetStateParams{ID: job.ID, FromStates: deadStates, State: leasetype.JobStateAvailable, ResetErrors: true})
		if !changed || row.State != leasetype.JobStateAvailable || row.Expiries != 0 {
			t.Errorf("changed %v state %s expiries %d, want true available 0", changed, row.State, row.Expiries)
		}
		mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
	})

	t.Run("RetryKeepsCountsWithoutReset", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: "dead", CountError: true})
		row, changed := setState(t, exec, &driver.JobSetStateParams{ID: job.ID, FromStates: deadStates, State: leasetype.JobStateAvailable})
		if !changed || row.Errors != 1 || row.LastError != "dead" {
			t.Errorf("changed %v errors %d last error %q, want true 1 \"dead\"", changed, row.Errors, row.LastError)
		}
	})

	t.Run("CancelAvailable", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		job := mustInsertOne(t, exec, jobParams("k", "q"))
		before := mustNow(t, exec)
		row, changed := setState(t, exec, &driver.JobSetStateParams{
			ID: job.ID, FromStates: []leasetype.JobState{leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable},
			State: leasetype.JobStateCancelled, Note: "cancelled by ops",
		})
		after := mustNow(t, exec)
		if !changed || row.State != leasetype.JobStateCancelled || row.LastError != "cancelled by ops" {
			t.Errorf("changed %v state %s last error %q, want true cancelled \"cancelled by ops\"", changed, row.State, row.LastError)
		}
		assertWithinPtr(t, "FinalizedAt", row.FinalizedAt, before, after)
		if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
			t.Errorf("claimed a cancelled job: %s", describeJobs(claimed))
		}
	})

	t.Run("ScheduleAt", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		job := mustInsertOne(t, exec, jobParams("k", "q"))
		at := mustNow(t, exec).Add(time.Hour)
		row, changed := setState(t, exec, &driver.JobSetStateParams{ID: job.ID, FromStates: []leasetype.JobState{leasetype.JobStateAvailable}, State: leasetype.JobStateScheduled, ScheduledAt: &at})
		if !changed || row.State != leasetype.JobStateScheduled {
			t.Errorf("changed %v state %s, want true scheduled", changed, row.State)
		}
		assertNear(t, "ScheduledAt", row.ScheduledAt, at, time.Millisecond)
		if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
			t.Errorf("claimed a job scheduled an hour ahead: %s", describeJobs(claimed))
		}
	})

	t.Run("RefusesRunning", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		row, changed := setState(t, exec, &driver.JobSetStateParams{
			ID: job.ID, FromStates: leasetype.JobStates(), State: leasetype.JobStateCancelled, Note: "nope",
		})
		if changed {
			t.Errorf("changed = true for a running job, want false")
		}
		assertRowEqual(t, "returned row", row, job)
		assertUnchanged(t, exec, "running job", job)
		assertSameIDs(t, "the holder can still finish", mustFinish(t, exec, "w", completeItem(job)), []int64{job.ID})
	})

	t.Run("RefusesStateNotInFrom", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		mustFinish(t, exec, "w", completeItem(job))
		done := mustGet(t, exec, job.ID)
		row, changed := setState(t, exec, &driver.JobSetStateParams{ID: job.ID, FromStates: deadStates, State: leasetype.JobStateAvailable, ResetErrors: true})
		if changed {
			t.Errorf("changed = true for a completed job not in FromStates, want false")
		}
		assertRowEqual(t, "returned row", row, done)
		assertUnchanged(t, exec, "completed job", done)
	})

	t.Run("SetStateNotFound", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		job := mustInsertOne(t, exec, jobParams("k", "q"))
		_, changed, err := exec.JobSetState(t.Context(), &driver.JobSetStateParams{ID: job.ID + 1000, FromStates: leasetype.JobStates(), State: leasetype.JobStateCancelled})
		assertNotFound(t, "JobSetState of a missing ID", err)
		if changed {
			t.Errorf("changed = true for a missing job")
		}
	})

	t.Run("ListFilters", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		keyed := jobParams("y", "b")
		keyed.UniqueKey = "k1"
		rows := mustInsert(t, exec, jobParams("x", "a"), jobParams("x", "a"), jobParams("x", "a"), jobParams("y", "b"), keyed)
		running := mustClaimOne(t, exec, claimParams("a", "w", 1, longTTL))

		all := jobIDs(rows)
		var aIDs, bIDs []int64
		for _, r := range rows {
			if r.Queue == "a" {
				aIDs = append(aIDs, r.ID)
			} else {
				bIDs = append(bIDs, r.ID)
			}
		}
		without := func(ids []int64, drop int64) []int64 {
			return slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return id == drop })
		}
		cases := []struct {
			name   string
			params driver.JobListParams
			want   []int64
		}{
			{"none", driver.JobListParams{}, all},
			{"running", driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateRunning}}, []int64{running.ID}},
			{"available", driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateAvailable}}, without(all, running.ID)},
			{"two states", driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateAvailable, leasetype.JobStateRunning}}, all},
			{"completed", driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateCompleted}}, nil},
			{"queue", driver.JobListParams{Queue: "b"}, bIDs},
			{"kind", driver.JobListParams{Kind: "x"}, aIDs},
			{"unique key", driver.JobListParams{UniqueKey: "k1"}, []int64{rows[4].ID}},
			{"queue and state", driver.JobListParams{Queue: "a", States: []leasetype.JobState{leasetype.JobStateAvailable}}, without(aIDs, running.ID)},
			{"no match", driver.JobListParams{Queue: "a", Kind: "y"}, nil},
		}
		for _, c := range cases {
			got := mustList(t, exec, &c.params)
			want := slices.Clone(c.want)
			slices.Sort(want)
			slices.Reverse(want)
			if !slices.Equal(jobIDs(got), want) {
				t.Errorf("JobList %s: got IDs %v, want %v (newest first)", c.name, jobIDs(got), want)
			}
		}
	})

	t.Run("ListPaging", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		var params []*driver.JobInsertParams
		for i := range 7 {
			p := jobParams("k", "q")
			p.EncodedArgs = fmt.Appendf(nil, `{"i": %d}`, i)
			params = append(params, p)
		}
		want := jobIDs(mustInsert(t, exec, params...))
		slices.Sort(want)
		slices.Reverse(want)

		var got []int64
		var before int64
		for page := 0; page < 10; page++ {
			rows := mustList(t, exec, &driver.JobListParams{Limit: 3, BeforeID: before})
			if len(rows) > 3 {
				t.Fatalf("page %d: %d rows, Limit is 3", page, len(rows))
			}
			if len(rows) == 0 {
				break
			}
			got = append(got, jobIDs(rows)...)
			before = rows[len(rows)-1].ID
		}
		if !slices.Equal(got, want) {
			t.Errorf("paged IDs = %v, want %v", got, want)
		}
	})

	t.Run("ListDefaultLimit", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		var params []*driver.JobInsertParams
		for range 105 {
			params = append(params, jobParams("k", "q"))
		}
		mustInsert(t, exec, params...)
		if got := mustList(t, exec, &driver.JobListParams{}); len(got) != 100 {
			t.Errorf("JobList with Limit 0 returned %d rows, want 100", len(got))
		}
	})

	t.Run("AttemptsOldestFirst", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		job := mustInsertOne(t, exec, jobParams("k", "q"))
		if got := mustAttempts(t, exec, job.ID); len(got) != 0 {
			t.Errorf("attempts of an unclaimed job = %d rows, want 0", len(got))
		}
		var tokens []int64
		for i, state := range []leasetype.JobState{leasetype.JobStateAvailable, leasetype.JobStateRetryable, leasetype.JobStateCompleted} {
			claimed := mustClaimOne(t, exec, claimParams("q", fmt.Sprintf("w%d", i), 1, longTTL))
			tokens = append(tokens, claimed.LeaseToken)
			outcome := []leasetype.AttemptOutcome{leasetype.OutcomeReleased, leasetype.OutcomeFailed, leasetype.OutcomeCompleted}[i]
			mustFinish(t, exec, claimed.LeaseOwner, &driver.JobFinish{ID: job.ID, Token: claimed.LeaseToken, State: state, Outcome: outcome})
		}
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 3 {
			t.Fatalf("attempt rows = %d, want 3", len(attempts))
		}
		for i, a := range attempts {
			if a.Attempt != i+1 || a.Token != tokens[i] || a.Owner != fmt.Sprintf("w%d", i) {
				t.Errorf("attempt %d: attempt %d token %d owner %s, want %d %d w%d", i, a.Attempt, a.Token, a.Owner, i+1, tokens[i], i)
			}
			if i > 0 && a.FinishedAt.Before(attempts[i-1].FinishedAt) {
				t.Errorf("attempt %d finished before attempt %d", i+1, i)
			}
		}
	})

	t.Run("AttemptsOfLeases", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		a := mustInsertOne(t, exec, jobParams("k", "lq"))
		bJob := mustInsertOne(t, exec, jobParams("k", "lq"))
		c := mustInsertOne(t, exec, jobParams("k", "lq"))
		// a: two leases (released, then completed); b: one (failed);
		// c: claimed and still running (no attempt row yet).
		first := mustClaimOne(t, exec, claimParams("lq", "w", 1, longTTL))
		if first.ID != a.ID {
			t.Fatalf("claimed job %d, want %d", first.ID, a.ID)
		}
		mustFinish(t, exec, "w", &driver.JobFinish{ID: a.ID, Token: first.LeaseToken, State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased})
		jobs := mustClaim(t, exec, claimParams("lq", "w", 3, longTTL))
		if len(jobs) != 3 {
			t.Fatalf("claimed %d jobs, want 3", len(jobs))
		}
		tokens := map[int64]int64{}
		for _, j := range jobs {
			tokens[j.ID] = j.LeaseToken
		}
		mustFinish(t, exec, "w", completeItem(&leasetype.JobRow{ID: a.ID, LeaseToken: tokens[a.ID]}),
			&driver.JobFinish{ID: bJob.ID, Token: tokens[bJob.ID], State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: "boom"})

		leases := []driver.LeaseRef{
			{ID: bJob.ID, Token: tokens[bJob.ID]},
			{ID: c.ID, Token: tokens[c.ID]},       // running: no row
			{ID: a.ID, Token: tokens[a.ID]},       // the second lease only
			{ID: a.ID, Token: tokens[a.ID] + 5},   // never granted
			{ID: bJob.ID, Token: tokens[bJob.ID]}, // named twice
			{ID: c.ID + 1000000, Token: 1},        // no such job
		}
		got, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: c.ID, Leases: leases})
		if err != nil {
			t.Fatalf("JobAttempts with Leases: %v", err)
		}
		type row struct {
			job, token int64
			outcome    leasetype.AttemptOutcome
		}
		var rows []row
		for _, r := range got {
			rows = append(rows, row{r.JobID, r.Token, r.Outcome})
		}
		want := []row{{a.ID, tokens[a.ID], leasetype.OutcomeCompleted}, {bJob.ID, tokens[bJob.ID], leasetype.OutcomeFailed}}
		if fmt.Sprint(rows) != fmt.Sprint(want) {
			t.Fatalf("attempts of leases = %v, want %v (ordered by job and token, each once)", rows, want)
		}
		if got[1].Owner != "w" || got[1].Error != "boom" {
			t.Errorf("attempt of job %d: owner %q error %q, want w and boom", bJob.ID, got[1].Owner, got[1].Error)
		}
		tooMany := make([]driver.LeaseRef, driver.MaxAttemptLeases+1)
		if _, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{Leases: tooMany}); err == nil {
			t.Errorf("JobAttempts naming %d leases: no error, want one", len(tooMany))
		}
	})

	t.Run("CountByState", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		future := mustNow(t, exec).Add(time.Hour)
		sched := jobParams("k", "b")
		sched.ScheduledAt = &future
		mustInsert(t, exec, jobParams("k", "a"), jobParams("k", "a"), jobParams("k", "a"), jobParams("k", "a"), sched, jobParams("k", "b"))
		jobs := mustClaim(t, exec, claimParams("a", "w", 2, longTTL))
		if len(jobs) != 2 {
			t.Fatalf("claimed %d jobs, want 2", len(jobs))
		}
		mustFinish(t, exec, "w", completeItem(jobs[0]))

		type key struct {
			queue string
			state leasetype.JobState
		}
		want := map[key]int64{
			{"a", leasetype.JobStateAvailable}: 2,
			{"a", leasetype.JobStateRunning}:   1,
			{"a", leasetype.JobStateCompleted}: 1,
			{"b", leasetype.JobStateScheduled}: 1,
			{"b", leasetype.JobStateAvailable}: 1,
		}
		counts, err := exec.JobCountByState(t.Context())
		if err != nil {
			t.Fatalf("JobCountByState: %v", err)
		}
		got := map[key]int64{}
		for _, c := range counts {
			k := key{c.Queue, c.State}
			if _, dup := got[k]; dup {
				t.Errorf("queue %s state %s counted twice", c.Queue, c.State)
			}
			if c.Count != 0 {
				got[k] = c.Count
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("counts = %v, want %v", got, want)
		}
	})
}
