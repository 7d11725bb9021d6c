package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseFencing specifies what fences a lease beyond its token: the
// lease owner, which a database rolled back by a failover cannot hand to
// another client, and the bound on a transaction that holds a completion.
func exerciseFencing[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("SurvivesTokenReuse", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		mustInsertOne(t, exec, jobParams("k", "q"))
		a := mustClaimOne(t, exec, claimParams("q", "worker-a", 1, longTTL))
		reclaimed := reclaimWithSameToken(t, exec, a, "worker-b")

		// worker-a still runs and holds the token number the database
		// issued again: every write it makes is refused.
		if ids := mustHeartbeat(t, exec, "worker-a", driver.LeaseRenewal{ID: a.ID, Token: a.LeaseToken, TTL: longTTL}); len(ids) != 0 {
			t.Errorf("stale holder's heartbeat renewed %v, want nothing", ids)
		}
		for _, state := range []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateRetryable, leasetype.JobStateDiscarded,
			leasetype.JobStateCancelled, leasetype.JobStateAvailable, leasetype.JobStateScheduled} {
			item := &driver.JobFinish{ID: a.ID, Token: a.LeaseToken, State: state, Outcome: leasetype.OutcomeFailed, Error: "stale", CountError: true}
			if state == leasetype.JobStateCompleted {
				item = completeItem(a)
			}
			if ids := mustFinish(t, exec, "worker-a", item); len(ids) != 0 {
				t.Errorf("stale holder's finish to %s wrote %v, want nothing", state, ids)
			}
		}
		tx, txExec := userTx(t, b, d)
		if ids := mustFinish(t, txExec, "worker-a", completeItem(a)); len(ids) != 0 {
			t.Errorf("stale holder's completion in its transaction wrote %v, want nothing", ids)
		}
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		assertUnchanged(t, exec, "job re-claimed by worker-b", reclaimed)
		if got := mustAttempts(t, exec, a.ID); len(got) != 0 {
			t.Fatalf("attempt rows after the stale holder's writes = %d, want none", len(got))
		}

		// worker-b, the holder the database knows, renews and completes
		// with the same token number.
		assertSameIDs(t, "worker-b's heartbeat", mustHeartbeat(t, exec, "worker-b",
			driver.LeaseRenewal{ID: a.ID, Token: a.LeaseToken, TTL: longTTL}), []int64{a.ID})
		assertSameIDs(t, "worker-b's completion", mustFinish(t, exec, "worker-b", completeItem(a)), []int64{a.ID})
		attempts := mustAttempts(t, exec, a.ID)
		if len(attempts) != 1 || attempts[0].Owner != "worker-b" || attempts[0].Token != a.LeaseToken || attempts[0].Outcome != leasetype.OutcomeCompleted {
			t.Fatalf("attempts = %+v, want one completed by worker-b with token %d", attempts, a.LeaseToken)
		}
	})

	t.Run("TxBound", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		d := b.New(t)
		exec := d.GetExecutor()
		bounds := false
		if tb, ok := any(d).(driver.TxBounder); ok {
			bounds = tb.BoundsTx()
		}
		mustInsertOne(t, exec, jobParams("k", "q"))
		job := mustClaimOne(t, exec, claimParams("q", "w", 1, shortTTL))
		tx, txExec := userTx(t, b, d)
		const bound = 150 * time.Millisecond
		ids, err := txExec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", TxBound: bound, Items: []*driver.JobFinish{completeItem(job)}})
		if err != nil {
			t.Fatalf("JobFinish with TxBound: %v", err)
		}
		assertSameIDs(t, "completion in the transaction", ids, []int64{job.ID})

		// The caller stalls, idle in its transaction, past the bound and
		// the lease. An expirer that runs meanwhile must not reclaim the
		// job while the transaction may still commit its completion.
		expired := make(chan []*leasetype.JobRow, 1)
		if !bounds {
			go func() {
				waitCtx, cancel := context.WithTimeout(context.Background(), waitLimit)
				defer cancel()
				waitPastBackground(waitCtx, exec, *job.LeaseUntil)
				jobs, _ := exec.JobExpire(waitCtx, &driver.JobExpireParams{Limit: 10})
				expired <- jobs
			}()
		}
		time.Sleep(3 * bound)
		waitLeaseExpired(t, exec, job)
		err = b.CommitTx(ctx, tx)

		if bounds {
			// The database aborted the transaction at the bound: the
			// completion rolled back with it and the row lock is free.
			if err == nil {
				t.Fatalf("commit after stalling past the bound succeeded, want the transaction aborted by the database")
			}
			if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateRunning || got.LeaseToken != job.LeaseToken {
				t.Fatalf("after the abort: state %s token %d, want running with token %d", got.State, got.LeaseToken, job.LeaseToken)
			}
			reclaimed := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10})
			if len(reclaimed) != 1 || reclaimed[0].ID != job.ID || reclaimed[0].State != leasetype.JobStateAvailable {
				t.Fatalf("JobExpire after the abort = %s, want job %d available", describeJobs(reclaimed), job.ID)
			}
			if got := mustAttempts(t, exec, job.ID); len(got) != 1 || got[0].Outcome != leasetype.OutcomeLeaseExpired {
				t.Fatalf("attempts = %+v, want one lease_expired", got)
			}
			return
		}
		// Nothing bounds the transaction on this database: it commits
		// after the lease's expiry, and only because its row lock (the
		// write lock on SQLite) kept the expirer out.
		if err != nil {
			t.Fatalf("CommitTx after the stall: %v (this backend does not bound the transaction: it must commit)", err)
		}
		if got := <-expired; len(got) != 0 {
			t.Fatalf("the expirer reclaimed %s while the completion's transaction held the row", describeJobs(got))
		}
		if got := mustGet(t, exec, job.ID); got.State != leasetype.JobStateCompleted {
			t.Fatalf("after the commit: state %s, want completed", got.State)
		}
		if got := mustAttempts(t, exec, job.ID); len(got) != 1 || got[0].Outcome != leasetype.OutcomeCompleted {
			t.Fatalf("attempts = %+v, want one completed", got)
		}
	})
}

// reclaimWithSameToken makes job look as a database rolled back by a
// failover leaves it after owner claims it again: the claim that the
// rollback lost is issued anew, with the same token number, to another
// client. The row is running with job's token and an unexpired lease, and
// its lease owner is owner. It returns the row.
func reclaimWithSameToken(t *testing.T, exec driver.Executor, job *leasetype.JobRow, owner string) *leasetype.JobRow {
	t.Helper()
	if err := exec.Exec(t.Context(), fmt.Sprintf("UPDATE leasehold_job SET lease_owner = '%s' WHERE id = %d", owner, job.ID)); err != nil {
		t.Fatalf("re-claim by SQL: %v", err)
	}
	got := mustGet(t, exec, job.ID)
	if got.State != leasetype.JobStateRunning || got.LeaseToken != job.LeaseToken || got.LeaseOwner != owner {
		t.Fatalf("after the re-claim: state %s token %d owner %q, want running, %d, %q", got.State, got.LeaseToken, got.LeaseOwner, job.LeaseToken, owner)
	}
	return got
}

// waitPastBackground is waitPast for a goroutine: it returns when the
// database clock passes target or ctx ends.
func waitPastBackground(ctx context.Context, exec driver.Executor, target time.Time) {
	for ctx.Err() == nil {
		if now, err := exec.Now(ctx); err == nil && now.After(target) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
