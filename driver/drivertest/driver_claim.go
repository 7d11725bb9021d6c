package drivertest

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseClaim specifies JobClaim: exclusivity, selection, order and the
// lease it grants.
func exerciseClaim[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("ExclusiveUnderConcurrency", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const jobs, workers, max = 1000, 8, 10
		var params []*driver.JobInsertParams
		for i := range jobs {
			p := jobParams("k", "busy")
			p.EncodedArgs = fmt.Appendf(nil, `{"i": %d}`, i)
			params = append(params, p)
		}
		for chunk := range slices.Chunk(params, 250) {
			mustInsert(t, exec, chunk...)
		}

		var (
			wg      sync.WaitGroup
			total   atomic.Int64
			mu      sync.Mutex
			claimed = map[int64][]string{}
			errs    = make(chan error, workers)
			start   = make(chan struct{})
		)
		deadline := time.Now().Add(waitLimit)
		for w := range workers {
			owner := fmt.Sprintf("worker-%d", w)
			wg.Go(func() {
				<-start
				for total.Load() < jobs {
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("%s: gave up with %d of %d jobs claimed", owner, total.Load(), jobs)
						return
					}
					got, err := exec.JobClaim(t.Context(), claimParams("busy", owner, max, longTTL))
					if err != nil {
						errs <- fmt.Errorf("%s: JobClaim: %w", owner, err)
						return
					}
					if len(got) > max {
						errs <- fmt.Errorf("%s: claimed %d jobs, Max is %d", owner, len(got), max)
						return
					}
					mu.Lock()
					for _, j := range got {
						claimed[j.ID] = append(claimed[j.ID], owner)
						if j.State != leasetype.JobStateRunning || j.LeaseOwner != owner || j.LeaseToken != 1 || j.Attempt != 1 {
							errs <- fmt.Errorf("%s: claimed job %d state %s owner %s token %d attempt %d, want running %s 1 1",
								owner, j.ID, j.State, j.LeaseOwner, j.LeaseToken, j.Attempt, owner)
							mu.Unlock()
							return
						}
					}
					mu.Unlock()
					total.Add(int64(len(got)))
					if len(got) == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if len(claimed) != jobs {
			t.Errorf("distinct jobs claimed = %d, want %d", len(claimed), jobs)
		}
		for id, owners := range claimed {
			if len(owners) != 1 {
				t.Errorf("job %d claimed %d times, by %v", id, len(owners), owners)
			}
		}
		if got := mustClaim(t, exec, claimParams("busy", "late", max, longTTL)); len(got) != 0 {
			t.Errorf("claim after all were taken: got %s, want none", describeJobs(got))
		}
		if n := countJobs(t, exec, driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateRunning}}); n != jobs {
			t.Errorf("running jobs = %d, want %d", n, jobs)
		}
	})

	t.Run("RespectsMax", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		for range 5 {
			mustInsertOne(t, exec, jobParams("k", "q"))
		}
		for _, step := range []struct{ max, want int }{{3, 3}, {1, 1}, {10, 1}, {10, 0}} {
			if got := mustClaim(t, exec, claimParams("q", "w", step.max, longTTL)); len(got) != step.want {
				t.Errorf("claim Max %d: got %d jobs, want %d", step.max, len(got), step.want)
			}
		}
	})

	t.Run("OnlyItsQueue", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		if got := mustClaim(t, exec, claimParams("q1", "w", 10, longTTL)); len(got) != 0 {
			t.Errorf("claim from an empty database: got %s", describeJobs(got))
		}
		a := mustInsert(t, exec, jobParams("k", "q1"), jobParams("k", "q1"))
		b2 := mustInsertOne(t, exec, jobParams("k", "q2"))
		if got := mustClaim(t, exec, claimParams("empty", "w", 10, longTTL)); len(got) != 0 {
			t.Errorf("claim from a queue with no jobs: got %s", describeJobs(got))
		}
		got := mustClaim(t, exec, claimParams("q1", "w", 10, longTTL))
		assertSameIDs(t, "claim from q1", jobIDs(got), jobIDs(a))
		for _, j := range got {
			if j.Queue != "q1" {
				t.Errorf("job %d from queue %s claimed from q1", j.ID, j.Queue)
			}
		}
		assertUnchanged(t, exec, "job in q2", b2)
	})

	t.Run("OrderPriorityScheduledID", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		now := mustNow(t, exec)
		specs := []struct {
			priority int
			offset   time.Duration
		}{
			{2, -10 * time.Second}, {1, -5 * time.Second}, {1, -20 * time.Second}, {3, -30 * time.Second},
			{1, -20 * time.Second}, {2, -15 * time.Second}, {4, -time.Hour}, {1, -20 * time.Second},
			{1, time.Hour}, // not due: never claimed here
		}
		var params []*driver.JobInsertParams
		for i, s := range specs {
			p := jobParams(fmt.Sprintf("k%d", i), "ordered")
			p.Priority = s.priority
			p.ScheduledAt = ptr(now.Add(s.offset))
			params = append(params, p)
		}
		rows := mustInsert(t, exec, params...)
		due := rows[:len(rows)-1]
		want := slices.Clone(due)
		slices.SortFunc(want, func(a, b *leasetype.JobRow) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
		})

		var order []int64
		for {
			got := mustClaim(t, exec, claimParams("ordered", "w", 3, longTTL))
			if len(got) == 0 {
				break
			}
			order = append(order, jobIDs(got)...)
			if len(order) > len(due) {
				break
			}
		}
		if !slices.Equal(order, jobIDs(want)) {
			t.Errorf("claim order = %v, want %v (priority, then scheduled_at, then id)", order, jobIDs(want))
		}
	})

	t.Run("GrantsLease", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		inserted := mustInsertOne(t, exec, jobParams("k", "q"))
		before := mustNow(t, exec)
		job := mustClaimOne(t, exec, claimParams("q", "worker-7", 5, 30*time.Second))
		after := mustNow(t, exec)

		want := *inserted
		want.State = leasetype.JobStateRunning
		want.Attempt = 1
		want.LeaseToken = 1
		want.LeaseOwner = "worker-7"
		want.LeasedAt, want.LeaseUntil = job.LeasedAt, job.LeaseUntil
		want.ExpiryPolicy = leasetype.ExpiryRetry
		assertRowEqual(t, "claimed job", job, &want)
		assertWithinPtr(t, "LeasedAt", job.LeasedAt, before, after)
		if job.LeasedAt != nil && job.LeaseUntil != nil {
			assertDuration(t, "LeaseUntil - LeasedAt", job.LeaseUntil.Sub(*job.LeasedAt), 30*time.Second)
		}
		assertUnchanged(t, exec, "stored claimed job", job)
	})

	t.Run("LeaseTTLPrecedence", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		own := jobParams("kind-ttl", "q")
		own.LeaseTTL = 7 * time.Second
		rows := mustInsert(t, exec, own, jobParams("kind-ttl", "q"), jobParams("plain", "q"))
		p := claimParams("q", "w", 10, 3*time.Second)
		p.KindLeaseTTL = map[string]time.Duration{"kind-ttl": 5 * time.Second, "unused": time.Hour}
		got := mustClaim(t, exec, p)
		byID := map[int64]*leasetype.JobRow{}
		for _, j := range got {
			byID[j.ID] = j
		}
		for i, want := range []time.Duration{7 * time.Second, 5 * time.Second, 3 * time.Second} {
			j := byID[rows[i].ID]
			if j == nil || j.LeasedAt == nil || j.LeaseUntil == nil {
				t.Errorf("job %d not claimed with a lease", rows[i].ID)
				continue
			}
			assertDuration(t, fmt.Sprintf("job %d (%s) lease", j.ID, []string{"job TTL", "kind TTL", "default TTL"}[i]), j.LeaseUntil.Sub(*j.LeasedAt), want)
			// The claim returns each row exactly as it stored it.
			assertUnchanged(t, exec, fmt.Sprintf("stored job %d", j.ID), j)
		}
	})

	t.Run("ExpiryPolicyFromStuckKinds", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		rows := mustInsert(t, exec, jobParams("charge", "q"), jobParams("email", "q"))
		p := claimParams("q", "w", 10, longTTL)
		p.StuckKinds = []string{"charge", "refund"}
		got := mustClaim(t, exec, p)
		if len(got) != 2 {
			t.Fatalf("claimed %d jobs, want 2", len(got))
		}
		for _, j := range got {
			want := leasetype.ExpiryRetry
			if j.ID == rows[0].ID {
				want = leasetype.ExpiryStuck
			}
			if j.ExpiryPolicy != want {
				t.Errorf("job %d (%s): ExpiryPolicy = %s, want %s", j.ID, j.Kind, j.ExpiryPolicy, want)
			}
			if stored := mustGet(t, exec, j.ID); stored.ExpiryPolicy != want {
				t.Errorf("stored job %d: ExpiryPolicy = %s, want %s", j.ID, stored.ExpiryPolicy, want)
			}
			assertUnchanged(t, exec, fmt.Sprintf("stored job %d", j.ID), j)
		}
	})

	t.Run("ReclaimAfterReleaseRaisesToken", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		first := mustClaimOne(t, exec, claimParams("q", "a", 1, longTTL))
		mustHeartbeat(t, exec, "a", driver.LeaseRenewal{ID: first.ID, Token: first.LeaseToken, TTL: longTTL})
		released := mustFinish(t, exec, "a", &driver.JobFinish{ID: first.ID, Token: first.LeaseToken, State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased})
		if len(released) != 1 {
			t.Fatalf("release wrote %v, want [%d]", released, first.ID)
		}
		second := mustClaimOne(t, exec, claimParams("q", "b", 1, longTTL))
		if second.ID != first.ID || second.LeaseToken != first.LeaseToken+1 || second.Attempt != first.Attempt+1 {
			t.Errorf("re-claim: job %d token %d attempt %d, want job %d token %d attempt %d",
				second.ID, second.LeaseToken, second.Attempt, first.ID, first.LeaseToken+1, first.Attempt+1)
		}
		if second.LeaseOwner != "b" || second.Heartbeats != 0 || second.HeartbeatAt != nil {
			t.Errorf("re-claim: owner %q heartbeats %d heartbeat_at %v, want owner b and heartbeat fields reset",
				second.LeaseOwner, second.Heartbeats, second.HeartbeatAt)
		}
		assertUnchanged(t, exec, "stored re-claimed job", second)
	})

	t.Run("ReclaimAfterExpiryRaisesToken", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		a, b2 := leaseLost(t, exec, "q")
		if b2.Attempt != a.Attempt+1 || b2.LeaseOwner != "worker-b" {
			t.Errorf("re-claim: attempt %d owner %q, want attempt %d owner worker-b", b2.Attempt, b2.LeaseOwner, a.Attempt+1)
		}
		if b2.LeasedAt == nil || a.LeaseUntil == nil || !b2.LeasedAt.After(*a.LeaseUntil) {
			t.Errorf("re-claim LeasedAt %v is not after the expired lease's end %v", b2.LeasedAt, a.LeaseUntil)
		}
	})

	t.Run("NotClaimableStates", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"), jobParams("k", "q"))
		jobs := mustClaim(t, exec, claimParams("q", "w", 3, longTTL))
		if len(jobs) != 3 {
			t.Fatalf("claimed %d jobs, want 3", len(jobs))
		}
		mustFinish(t, exec, "w",
			completeItem(jobs[0]),
			&driver.JobFinish{ID: jobs[1].ID, Token: jobs[1].LeaseToken, State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: "x", CountError: true},
		)
		// jobs[2] stays running under a live lease.
		if got := mustClaim(t, exec, claimParams("q", "w2", 10, longTTL)); len(got) != 0 {
			t.Errorf("claim of completed, discarded and running jobs: got %s, want none", describeJobs(got))
		}
	})
}
