package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseHeartbeat specifies JobHeartbeat: renewal, and the fencing of
// stale tokens and expired leases.
func exerciseHeartbeat[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("RenewsMany", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"), jobParams("k", "q"))
		jobs := mustClaim(t, exec, claimParams("q", "w", 3, longTTL))
		if len(jobs) != 3 {
			t.Fatalf("claimed %d jobs, want 3", len(jobs))
		}
		waitPast(t, exec, jobs[0].LeasedAt.Add(20*time.Millisecond))

		renew := func(ttl time.Duration) []int64 {
			var leases []driver.LeaseRenewal
			for _, j := range jobs {
				leases = append(leases, driver.LeaseRenewal{ID: j.ID, Token: j.LeaseToken, TTL: ttl})
			}
			return mustHeartbeat(t, exec, "w", leases...)
		}
		before := mustNow(t, exec)
		assertSameIDs(t, "first heartbeat renewed", renew(2*longTTL), jobIDs(jobs))
		after := mustNow(t, exec)
		first := map[int64]*leasetype.JobRow{}
		for _, j := range jobs {
			got := mustGet(t, exec, j.ID)
			first[j.ID] = got
			want := *j
			want.LeaseUntil, want.HeartbeatAt, want.Heartbeats = got.LeaseUntil, got.HeartbeatAt, 1
			assertRowEqual(t, fmt.Sprintf("job %d after a heartbeat", j.ID), got, &want)
			assertWithinPtr(t, "HeartbeatAt", got.HeartbeatAt, before, after)
			if got.HeartbeatAt != nil && got.LeaseUntil != nil {
				assertDuration(t, "LeaseUntil - HeartbeatAt", got.LeaseUntil.Sub(*got.HeartbeatAt), 2*longTTL)
				if !got.LeaseUntil.After(*j.LeaseUntil) {
					t.Errorf("job %d: LeaseUntil %s did not move past the claimed %s", j.ID, got.LeaseUntil, j.LeaseUntil)
				}
			}
		}

		waitPast(t, exec, after.Add(10*time.Millisecond))
		assertSameIDs(t, "second heartbeat renewed", renew(2*longTTL), jobIDs(jobs))
		for _, j := range jobs {
			got := mustGet(t, exec, j.ID)
			if got.Heartbeats != 2 {
				t.Errorf("job %d: Heartbeats = %d after two renewals, want 2", j.ID, got.Heartbeats)
			}
			if got.HeartbeatAt == nil || !got.HeartbeatAt.After(*first[j.ID].HeartbeatAt) {
				t.Errorf("job %d: HeartbeatAt %v did not move past %v", j.ID, got.HeartbeatAt, first[j.ID].HeartbeatAt)
			}
		}
	})

	t.Run("EachLeaseItsTTL", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"))
		jobs := mustClaim(t, exec, claimParams("q", "w", 2, longTTL))
		if len(jobs) != 2 {
			t.Fatalf("claimed %d jobs, want 2", len(jobs))
		}
		// The second renewal shortens its lease: the TTL is the caller's.
		ttls := []time.Duration{2 * longTTL, 5 * time.Second}
		renewed := mustHeartbeat(t, exec, "w",
			driver.LeaseRenewal{ID: jobs[0].ID, Token: jobs[0].LeaseToken, TTL: ttls[0]},
			driver.LeaseRenewal{ID: jobs[1].ID, Token: jobs[1].LeaseToken, TTL: ttls[1]},
		)
		assertSameIDs(t, "renewed", renewed, jobIDs(jobs))
		for i, j := range jobs {
			got := mustGet(t, exec, j.ID)
			if got.HeartbeatAt == nil || got.LeaseUntil == nil {
				t.Errorf("job %d: HeartbeatAt %v LeaseUntil %v, want both set", j.ID, got.HeartbeatAt, got.LeaseUntil)
				continue
			}
			assertDuration(t, fmt.Sprintf("job %d LeaseUntil - HeartbeatAt", j.ID), got.LeaseUntil.Sub(*got.HeartbeatAt), ttls[i])
		}
	})

	t.Run("StaleTokenNotRenewed", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		a, bJob := leaseLost(t, exec, "q")
		mustInsertOne(t, exec, jobParams("k", "other"))
		good := mustClaimOne(t, exec, claimParams("other", "worker-a", 1, longTTL))

		renewed := mustHeartbeat(t, exec, "worker-a",
			driver.LeaseRenewal{ID: a.ID, Token: a.LeaseToken, TTL: longTTL},
			driver.LeaseRenewal{ID: good.ID, Token: good.LeaseToken, TTL: longTTL},
		)
		assertSameIDs(t, "renewed with one stale and one live token", renewed, []int64{good.ID})
		assertUnchanged(t, exec, "job leased to worker-b", bJob)
		if got := mustGet(t, exec, good.ID); got.Heartbeats != 1 {
			t.Errorf("live lease: Heartbeats = %d, want 1", got.Heartbeats)
		}
	})

	t.Run("WrongTokenNotRenewed", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		renewed := mustHeartbeat(t, exec, "w",
			driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken + 1, TTL: longTTL},
			driver.LeaseRenewal{ID: job.ID + 1000, Token: 1, TTL: longTTL},
		)
		if len(renewed) != 0 {
			t.Errorf("renewed %v with a future token and a missing job, want none", renewed)
		}
		assertUnchanged(t, exec, "job", job)
	})

	t.Run("ExpiredLeaseNotRenewed", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, shortTTL))
		waitLeaseExpired(t, exec, job)
		if renewed := mustHeartbeat(t, exec, "w", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: longTTL}); len(renewed) != 0 {
			t.Errorf("renewed %v after the lease expired, want none", renewed)
		}
		assertUnchanged(t, exec, "job with an expired lease", job)
	})

	t.Run("FinishedJobNotRenewed", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		mustFinish(t, exec, "w", completeItem(job))
		done := mustGet(t, exec, job.ID)
		if renewed := mustHeartbeat(t, exec, "w", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: longTTL}); len(renewed) != 0 {
			t.Errorf("renewed %v on a completed job, want none", renewed)
		}
		assertUnchanged(t, exec, "completed job", done)
	})

	t.Run("EmptyIsNoop", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		if renewed := mustHeartbeat(t, exec, "w"); len(renewed) != 0 {
			t.Errorf("empty heartbeat renewed %v", renewed)
		}
		if ids := mustFinish(t, exec, "w"); len(ids) != 0 {
			t.Errorf("empty finish wrote %v", ids)
		}
		if res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{}); err != nil || len(res) != 0 {
			t.Errorf("empty JobInsertMany: %d results, err %v; want none and nil", len(res), err)
		}
	})
}
