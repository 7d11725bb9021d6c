package drivertest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseExpire specifies JobExpire, the expirer's statement.
func exerciseExpire[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("RetryPolicyToAvailable", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		// A long first lease so the heartbeat cannot miss it; the renewal
		// shortens it.
		job := mustClaimOne(t, exec, claimParams("q", "worker-1", 1, 10*shortTTL))
		if ids := mustHeartbeat(t, exec, "worker-1", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: shortTTL}); len(ids) != 1 {
			t.Fatalf("heartbeat renewed %v, want [%d]", ids, job.ID)
		}
		renewed := mustGet(t, exec, job.ID)
		waitLeaseExpired(t, exec, renewed)

		before := mustNow(t, exec)
		got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
		after := mustNow(t, exec)
		if len(got) != 1 || got[0].ID != job.ID {
			t.Fatalf("JobExpire returned %s, want job %d", describeJobs(got), job.ID)
		}
		row := got[0]
		if row.State != leasetype.JobStateAvailable || row.Expiries != 1 || row.Errors != 0 || row.FinalizedAt != nil {
			t.Errorf("expired job: state %s expiries %d errors %d finalized %v, want available 1 0 nil",
				row.State, row.Expiries, row.Errors, row.FinalizedAt)
		}
		assertWithin(t, "ScheduledAt", row.ScheduledAt, before, after)
		assertRowEqual(t, "stored job vs JobExpire's row", mustGet(t, exec, job.ID), row)

		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 {
			t.Fatalf("attempt rows = %d, want 1", len(attempts))
		}
		a := attempts[0]
		if a.Outcome != leasetype.OutcomeLeaseExpired || a.Token != job.LeaseToken || a.Attempt != 1 || a.Owner != "worker-1" || a.Heartbeats != 1 {
			t.Errorf("attempt row = %+v, want lease_expired token %d attempt 1 owner worker-1 heartbeats 1", *a, job.LeaseToken)
		}
		assertNear(t, "attempt LeasedAt", a.LeasedAt, *job.LeasedAt, 0)
		assertNear(t, "attempt LeaseUntil", a.LeaseUntil, *renewed.LeaseUntil, 0)
		assertWithin(t, "attempt FinishedAt", a.FinishedAt, before, after)

		if again := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(again) != 0 {
			t.Errorf("second JobExpire returned %s, want none", describeJobs(again))
		}
		next := mustClaimOne(t, exec, claimParams("q", "worker-2", 1, shortTTL))
		if next.Attempt != 2 || next.LeaseToken != 2 || next.Expiries != 1 {
			t.Errorf("re-claim: attempt %d token %d expiries %d, want 2 2 1", next.Attempt, next.LeaseToken, next.Expiries)
		}
		// MaxExpiries zero never sends a retry-policy job to stuck.
		waitLeaseExpired(t, exec, next)
		if got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(got) != 1 || got[0].State != leasetype.JobStateAvailable || got[0].Expiries != 2 {
			t.Errorf("second expiry: got %s expiries %v, want available with 2 expiries", describeJobs(got), expiriesOf(got))
		}
	})

	t.Run("StuckPolicyToStuck", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("charge", "q"))
		p := claimParams("q", "w", 1, shortTTL)
		p.StuckKinds = []string{"charge"}
		job := mustClaimOne(t, exec, p)
		waitLeaseExpired(t, exec, job)
		before := mustNow(t, exec)
		got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
		after := mustNow(t, exec)
		if len(got) != 1 || got[0].ID != job.ID {
			t.Fatalf("JobExpire returned %s, want job %d", describeJobs(got), job.ID)
		}
		if got[0].State != leasetype.JobStateStuck || got[0].Expiries != 1 || got[0].Errors != 0 {
			t.Errorf("expired job: state %s expiries %d errors %d, want stuck 1 0", got[0].State, got[0].Expiries, got[0].Errors)
		}
		assertWithinPtr(t, "FinalizedAt", got[0].FinalizedAt, before, after)
		attempts := mustAttempts(t, exec, job.ID)
		if len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeLeaseExpired {
			t.Errorf("attempts = %+v, want one lease_expired row", attempts)
		}
		if claimed := mustClaim(t, exec, claimParams("q", "w", 1, longTTL)); len(claimed) != 0 {
			t.Errorf("claimed a stuck job: %s", describeJobs(claimed))
		}
	})

	t.Run("MaxExpiriesToStuck", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		inserted := mustInsertOne(t, exec, jobParams("k", "q"))
		params := &driver.JobExpireParams{Limit: 10, MaxExpiries: 2}
		for i, want := range []leasetype.JobState{leasetype.JobStateAvailable, leasetype.JobStateStuck} {
			job := mustClaimOne(t, exec, claimParams("q", "w", 1, shortTTL))
			waitLeaseExpired(t, exec, job)
			got := mustExpire(t, exec, params)
			if len(got) != 1 || got[0].State != want || got[0].Expiries != i+1 {
				t.Fatalf("expiry %d: got %s expiries %v, want %s with %d expiries", i+1, describeJobs(got), expiriesOf(got), want, i+1)
			}
		}
		if n := len(mustAttempts(t, exec, inserted.ID)); n != 2 {
			t.Errorf("attempt rows = %d, want 2", n)
		}
	})

	t.Run("LiveLeasesUntouched", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsert(t, exec, jobParams("k", "short"), jobParams("k", "long"), jobParams("k", "waiting"))
		short := mustClaimOne(t, exec, claimParams("short", "w", 1, shortTTL))
		long := mustClaimOne(t, exec, claimParams("long", "w", 1, longTTL))
		waiting := mustList(t, exec, &driver.JobListParams{Queue: "waiting"})[0]
		waitLeaseExpired(t, exec, short)
		got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
		assertSameIDs(t, "expired", jobIDs(got), []int64{short.ID})
		assertUnchanged(t, exec, "job with a live lease", long)
		assertUnchanged(t, exec, "available job", waiting)
		if n := len(mustAttempts(t, exec, long.ID)); n != 0 {
			t.Errorf("live job: attempt rows = %d, want 0", n)
		}
	})

	t.Run("QueueAndKinds", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		// Expired leases: a in q, b in q2, c in q2, a in q3.
		mustInsert(t, exec, jobParams("a", "q"), jobParams("b", "q2"), jobParams("c", "q2"), jobParams("a", "q3"))
		var jobs []*leasetype.JobRow
		for _, q := range []string{"q", "q2", "q3"} {
			jobs = append(jobs, mustClaim(t, exec, claimParams(q, "w", 10, shortTTL))...)
		}
		if len(jobs) != 4 {
			t.Fatalf("claimed %d jobs, want 4", len(jobs))
		}
		byKey := map[string]*leasetype.JobRow{}
		for _, j := range jobs {
			byKey[j.Queue+"/"+j.Kind] = j
		}
		waitLeaseExpired(t, exec, jobs...)

		got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10, Queue: "q", Kinds: []string{"b"}})
		assertSameIDs(t, "expired for queue q and kind b", jobIDs(got), []int64{byKey["q/a"].ID, byKey["q2/b"].ID})
		got = mustExpire(t, exec, &driver.JobExpireParams{Limit: 10, Kinds: []string{"a"}})
		assertSameIDs(t, "expired for kind a", jobIDs(got), []int64{byKey["q3/a"].ID})
		got = mustExpire(t, exec, &driver.JobExpireParams{Limit: 10, Queue: "q3"})
		if len(got) != 0 {
			t.Errorf("expired for queue q3, whose lease is reclaimed: got %s, want none", describeJobs(got))
		}
		got = mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
		assertSameIDs(t, "expired, unrestricted", jobIDs(got), []int64{byKey["q2/c"].ID})
	})

	t.Run("RespectsLimit", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		for range 5 {
			mustInsertOne(t, exec, jobParams("k", "q"))
		}
		jobs := mustClaim(t, exec, claimParams("q", "w", 5, shortTTL))
		if len(jobs) != 5 {
			t.Fatalf("claimed %d jobs, want 5", len(jobs))
		}
		waitLeaseExpired(t, exec, jobs...)
		first := mustExpire(t, exec, &driver.JobExpireParams{Limit: 2})
		if len(first) != 2 {
			t.Errorf("JobExpire Limit 2 returned %d jobs, want 2", len(first))
		}
		if n := countJobs(t, exec, driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateRunning}}); n != 3 {
			t.Errorf("running jobs after Limit 2 = %d, want 3", n)
		}
		rest := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
		if len(rest) != 3 {
			t.Errorf("second JobExpire returned %d jobs, want 3", len(rest))
		}
		assertSameIDs(t, "all expired", append(jobIDs(first), jobIDs(rest)...), jobIDs(jobs))
	})

	t.Run("ConcurrentNoDoubleProcessing", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const n, watchers = 40, 4
		var params []*driver.JobInsertParams
		for range n {
			params = append(params, jobParams("k", "q"))
		}
		mustInsert(t, exec, params...)
		jobs := mustClaim(t, exec, claimParams("q", "w", n, shortTTL))
		if len(jobs) != n {
			t.Fatalf("claimed %d jobs, want %d", len(jobs), n)
		}
		waitLeaseExpired(t, exec, jobs...)

		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			seen  = map[int64]int{}
			errs  = make(chan error, watchers)
			start = make(chan struct{})
		)
		for range watchers {
			wg.Go(func() {
				<-start
				for {
					got, err := exec.JobExpire(t.Context(), &driver.JobExpireParams{Limit: 3})
					if err != nil {
						errs <- fmt.Errorf("JobExpire: %w", err)
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, j := range got {
						seen[j.ID]++
					}
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		// A watcher may stop early while the others hold rows; sweep the rest.
		for _, j := range mustExpire(t, exec, &driver.JobExpireParams{Limit: n}) {
			seen[j.ID]++
		}
		if len(seen) != n {
			t.Errorf("distinct jobs reclaimed = %d, want %d", len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Errorf("job %d reclaimed %d times", id, c)
			}
		}
		total := 0
		for _, j := range jobs {
			attempts := mustAttempts(t, exec, j.ID)
			total += len(attempts)
			if got := mustGet(t, exec, j.ID); got.Expiries != 1 || got.State != leasetype.JobStateAvailable {
				t.Errorf("job %d: state %s expiries %d, want available 1", j.ID, got.State, got.Expiries)
			}
		}
		if total != n {
			t.Errorf("attempt rows = %d, want %d (one per expired lease)", total, n)
		}
	})
}

func expiriesOf(jobs []*leasetype.JobRow) []int {
	out := make([]int, len(jobs))
	for i, j := range jobs {
		out[i] = j.Expiries
	}
	return out
}
