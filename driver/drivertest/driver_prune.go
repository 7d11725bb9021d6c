package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// pruneGap separates the old rows of the age test from the young ones on the
// database clock; the test prunes at half of it, so either side has
// pruneGap/2 of margin.
const pruneGap = 1200 * time.Millisecond

// exercisePrune specifies retention: JobPrune deletes finished jobs by state
// and age, AttemptPrune deletes attempt rows by age, each at most Limit.
func exercisePrune[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	finished := []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled}

	t.Run("JobPruneStates", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustInsert(t, exec, jobParams("k", "fin"), jobParams("k", "fin"), jobParams("k", "fin"), jobParams("k", "fin"), jobParams("k", "fin"))
		jobs := mustClaim(t, exec, claimParams("fin", "w", 5, longTTL))
		if len(jobs) != 5 {
			t.Fatalf("claimed %d jobs, want 5", len(jobs))
		}
		completed := []*leasetype.JobRow{jobs[0], jobs[1]}
		discarded, cancelled, running := jobs[2], jobs[3], jobs[4]
		mustFinish(t, exec, "w", completeItem(jobs[0]), completeItem(jobs[1]),
			&driver.JobFinish{ID: discarded.ID, Token: discarded.LeaseToken, State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: "dead", CountError: true},
			&driver.JobFinish{ID: cancelled.ID, Token: cancelled.LeaseToken, State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled})
		// A stuck job has a FinalizedAt too, but it is not finished.
		mustInsertOne(t, exec, jobParams("charge", "stuck"))
		sp := claimParams("stuck", "w", 1, longTTL)
		sp.StuckKinds = []string{"charge"}
		stuck := shortenLease(t, exec, mustClaimOne(t, exec, sp))
		waitLeaseExpired(t, exec, stuck)
		if got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(got) != 1 || got[0].State != leasetype.JobStateStuck {
			t.Fatalf("JobExpire: got %s, want the job stuck", describeJobs(got))
		}
		available := mustInsertOne(t, exec, jobParams("k", "wait"))

		var latest time.Time
		for _, id := range []int64{jobs[0].ID, jobs[1].ID, discarded.ID, cancelled.ID, stuck.ID} {
			if f := mustGet(t, exec, id).FinalizedAt; f != nil && f.After(latest) {
				latest = *f
			}
		}

		// Nothing is an hour old.
		if n := mustJobPrune(t, exec, &driver.JobPruneParams{States: finished, OlderThan: time.Hour, Limit: 100}); n != 0 {
			t.Errorf("JobPrune OlderThan 1h deleted %d jobs, want 0", n)
		}
		waitPast(t, exec, latest.Add(5*time.Millisecond))
		n := mustJobPrune(t, exec, &driver.JobPruneParams{
			States: []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateCancelled}, Limit: 100,
		})
		if n != 3 {
			t.Errorf("JobPrune of completed and cancelled deleted %d jobs, want 3", n)
		}
		for _, j := range []*leasetype.JobRow{completed[0], completed[1], cancelled} {
			_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: j.ID})
			assertNotFound(t, "JobGet of a pruned job", err)
			// The attempt history has its own retention.
			if a := mustAttempts(t, exec, j.ID); len(a) != 1 {
				t.Errorf("attempt rows of pruned job %d = %d, want 1 (kept)", j.ID, len(a))
			}
		}
		for _, j := range []*leasetype.JobRow{discarded, stuck, running, available} {
			mustGet(t, exec, j.ID)
		}

		if n := mustJobPrune(t, exec, &driver.JobPruneParams{States: []leasetype.JobState{leasetype.JobStateDiscarded}, Limit: 100}); n != 1 {
			t.Errorf("JobPrune of discarded deleted %d jobs, want 1", n)
		}
		_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: discarded.ID})
		assertNotFound(t, "JobGet of the pruned discarded job", err)
		if n := mustJobPrune(t, exec, &driver.JobPruneParams{States: finished, Limit: 100}); n != 0 {
			t.Errorf("JobPrune with nothing left to prune deleted %d jobs, want 0", n)
		}
		for _, j := range []*leasetype.JobRow{stuck, running, available} {
			mustGet(t, exec, j.ID)
		}
	})

	t.Run("JobPruneLimit", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		jobs := finishedJobs(t, exec, "q", 5)
		waitPast(t, exec, latestFinalized(t, exec, jobs).Add(5*time.Millisecond))
		for _, want := range []int64{2, 2, 1, 0} {
			if n := mustJobPrune(t, exec, &driver.JobPruneParams{States: finished, Limit: 2}); n != want {
				t.Errorf("JobPrune Limit 2 deleted %d jobs, want %d", n, want)
			}
		}
		if n := countJobs(t, exec, driver.JobListParams{}); n != 0 {
			t.Errorf("jobs left = %d, want 0", n)
		}
	})

	t.Run("AttemptPruneLimit", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		jobs := finishedJobs(t, exec, "q", 3)
		// A fourth attempt row from an expired lease; the job runs again.
		mustInsertOne(t, exec, jobParams("k", "exp"))
		expiring := shortenLease(t, exec, mustClaimOne(t, exec, claimParams("exp", "w", 1, longTTL)))
		waitLeaseExpired(t, exec, expiring)
		if got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(got) != 1 {
			t.Fatalf("JobExpire: got %s, want one job", describeJobs(got))
		}
		running := mustClaimOne(t, exec, claimParams("exp", "w", 1, longTTL))
		all := append(jobIDs(jobs), running.ID)

		var latest time.Time
		for _, id := range all {
			for _, a := range mustAttempts(t, exec, id) {
				if a.FinishedAt.After(latest) {
					latest = a.FinishedAt
				}
			}
		}
		if n := mustAttemptPrune(t, exec, &driver.AttemptPruneParams{OlderThan: time.Hour, Limit: 100}); n != 0 {
			t.Errorf("AttemptPrune OlderThan 1h deleted %d rows, want 0", n)
		}
		if n := attemptCount(t, exec, all); n != 4 {
			t.Fatalf("attempt rows = %d, want 4", n)
		}
		waitPast(t, exec, latest.Add(5*time.Millisecond))
		// Four attempt rows, or, where the completed jobs' rows hold their
		// leases, the expired lease's alone.
		pruned, inRows := []int64{3, 1, 0}, 0
		if b.CompletionInJobRow {
			pruned, inRows = []int64{1, 0, 0}, len(jobs)
		}
		for _, want := range pruned {
			if n := mustAttemptPrune(t, exec, &driver.AttemptPruneParams{Limit: 3}); n != want {
				t.Errorf("AttemptPrune Limit 3 deleted %d rows, want %d", n, want)
			}
		}
		if n := attemptCount(t, exec, all); n != inRows {
			t.Errorf("attempt rows left = %d, want %d", n, inRows)
		}
		// Jobs are not touched; the running lease still finishes.
		for _, j := range jobs {
			if got := mustGet(t, exec, j.ID); got.State != leasetype.JobStateCompleted {
				t.Errorf("job %d after AttemptPrune: state %s, want completed", j.ID, got.State)
			}
		}
		assertSameIDs(t, "finish after AttemptPrune", mustFinish(t, exec, "w", completeItem(running)), []int64{running.ID})
		if n := attemptCount(t, exec, all); n != inRows+1 {
			t.Errorf("attempt rows after a new finish = %d, want %d", n, inRows+1)
		}
		if !b.CompletionInJobRow {
			return
		}
		// Deleting the jobs (the one just completed too) moves their leases
		// into the attempt rows, where they are as old as their finish and
		// AttemptPrune takes them with the expired lease's.
		if n := mustJobPrune(t, exec, &driver.JobPruneParams{States: finished, Limit: 100}); n != int64(len(all)) {
			t.Fatalf("JobPrune deleted %d jobs, want %d", n, len(all))
		}
		if n := attemptCount(t, exec, all); n != inRows+1 {
			t.Errorf("attempt rows of the pruned jobs = %d, want %d (kept)", n, inRows+1)
		}
		if n := mustAttemptPrune(t, exec, &driver.AttemptPruneParams{Limit: 100}); n != int64(inRows+1) {
			t.Errorf("AttemptPrune after the jobs' deletion deleted %d rows, want %d", n, inRows+1)
		}
		if n := attemptCount(t, exec, all); n != 0 {
			t.Errorf("attempt rows after AttemptPrune = %d, want 0", n)
		}
	})

	t.Run("OlderThan", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		old := finishedJobs(t, exec, "old", 2)
		waitPast(t, exec, latestFinalized(t, exec, old).Add(pruneGap))
		young := finishedJobs(t, exec, "young", 1)[0]
		youngAt := *young.FinalizedAt

		nJobs := mustJobPrune(t, exec, &driver.JobPruneParams{States: finished, OlderThan: pruneGap / 2, Limit: 100})
		nAttempts := mustAttemptPrune(t, exec, &driver.AttemptPruneParams{OlderThan: pruneGap / 2, Limit: 100})
		after := mustNow(t, exec)

		for _, j := range old {
			_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: j.ID})
			assertNotFound(t, "JobGet of an old pruned job", err)
			if a := mustAttempts(t, exec, j.ID); len(a) != 0 {
				t.Errorf("old job %d: attempt rows = %d, want 0", j.ID, len(a))
			}
		}
		if after.Sub(youngAt) >= pruneGap/2-clockSlack {
			// The run was too slow for the young rows' age to be known.
			t.Logf("prune ran %s after the young job finished; not checking that it was kept", after.Sub(youngAt))
			return
		}
		if nJobs != 2 || nAttempts != 2 {
			t.Errorf("JobPrune deleted %d jobs and AttemptPrune %d rows, want 2 and 2 (the old ones only)", nJobs, nAttempts)
		}
		mustGet(t, exec, young.ID)
		if a := mustAttempts(t, exec, young.ID); len(a) != 1 {
			t.Errorf("young job: attempt rows = %d, want 1", len(a))
		}
	})
}

// finishedJobs inserts n jobs into queue, claims and completes them, and
// returns them as stored.
func finishedJobs(t *testing.T, exec driver.Executor, queue string, n int) []*leasetype.JobRow {
	t.Helper()
	params := make([]*driver.JobInsertParams, n)
	for i := range params {
		params[i] = jobParams("k", queue)
	}
	mustInsert(t, exec, params...)
	jobs := mustClaim(t, exec, claimParams(queue, "w", n, longTTL))
	if len(jobs) != n {
		t.Fatalf("claimed %d jobs from %s, want %d", len(jobs), queue, n)
	}
	items := make([]*driver.JobFinish, n)
	for i, j := range jobs {
		items[i] = completeItem(j)
	}
	assertSameIDs(t, "completed", mustFinish(t, exec, "w", items...), jobIDs(jobs))
	for i, j := range jobs {
		jobs[i] = mustGet(t, exec, j.ID)
	}
	return jobs
}

// latestFinalized returns the latest FinalizedAt of the stored jobs.
func latestFinalized(t *testing.T, exec driver.Executor, jobs []*leasetype.JobRow) time.Time {
	t.Helper()
	var latest time.Time
	for _, j := range jobs {
		f := mustGet(t, exec, j.ID).FinalizedAt
		if f == nil {
			t.Fatalf("job %d has no FinalizedAt", j.ID)
		}
		if f.After(latest) {
			latest = *f
		}
	}
	return latest
}

func attemptCount(t *testing.T, exec driver.Executor, ids []int64) int {
	t.Helper()
	n := 0
	for _, id := range ids {
		rows, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: id})
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("JobAttempts(%d): %v", id, err)
		}
		n += len(rows)
	}
	return n
}

func mustJobPrune(t *testing.T, exec driver.Executor, p *driver.JobPruneParams) int64 {
	t.Helper()
	n, err := exec.JobPrune(t.Context(), p)
	if err != nil {
		t.Fatalf("JobPrune(%v, older than %s, limit %d): %v", p.States, p.OlderThan, p.Limit, err)
	}
	return n
}

func mustAttemptPrune(t *testing.T, exec driver.Executor, p *driver.AttemptPruneParams) int64 {
	t.Helper()
	n, err := exec.AttemptPrune(t.Context(), p)
	if err != nil {
		t.Fatalf("AttemptPrune(older than %s, limit %d): %v", p.OlderThan, p.Limit, err)
	}
	return n
}
