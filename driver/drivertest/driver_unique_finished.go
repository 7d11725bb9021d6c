package drivertest

import (
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseUniqueFinished specifies JobInsertParams.UniqueFinished: a
// finished job keeps its unique key only in the finished states it names.
func exerciseUniqueFinished[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	const (
		completed = leasetype.JobStateCompleted
		discarded = leasetype.JobStateDiscarded
		cancelled = leasetype.JobStateCancelled
	)
	finishAs := func(t *testing.T, exec driver.Executor, queue string, final leasetype.JobState) *leasetype.JobRow {
		t.Helper()
		job := mustClaimOne(t, exec, claimParams(queue, "w", 1, longTTL))
		outcome := map[leasetype.JobState]leasetype.AttemptOutcome{completed: leasetype.OutcomeCompleted, discarded: leasetype.OutcomeFailed, cancelled: leasetype.OutcomeCancelled}[final]
		if ids := mustFinish(t, exec, "w", &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: final, Outcome: outcome}); len(ids) != 1 {
			t.Fatalf("JobFinish to %s wrote %v, want [%d]", final, ids, job.ID)
		}
		return mustGet(t, exec, job.ID)
	}
	keyed := func(key string, finished ...leasetype.JobState) *driver.JobInsertParams {
		p := jobParams("k", "q")
		p.UniqueKey = key
		p.UniqueFinished = finished
		return p
	}

	for _, final := range []leasetype.JobState{completed, discarded, cancelled} {
		t.Run("HeldAfter"+title(string(final)), func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			mustInsertOne(t, exec, keyed("k", final))
			done := finishAs(t, exec, "q", final)

			// The finished job holds the key, whatever the newcomer asks for.
			for _, p := range []*driver.JobInsertParams{keyed("k"), keyed("k", final)} {
				r := mustInsertMany(t, exec, p)[0]
				if !r.UniqueSkipped || r.Job.ID != done.ID {
					t.Errorf("insert after the holder became %s (UniqueFinished [%s]): UniqueSkipped=%v ID=%d, want skipped with ID %d",
						final, final, r.UniqueSkipped, r.Job.ID, done.ID)
					continue
				}
				assertRowEqual(t, "existing job returned", r.Job, done)
			}
			if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "k"}); n != 1 {
				t.Errorf("jobs with the key = %d, want 1", n)
			}
		})

		t.Run("FreeAfter"+title(string(final))+"WithOtherStates", func(t *testing.T) {
			t.Parallel()
			exec := b.New(t).GetExecutor()
			var others []leasetype.JobState
			for _, s := range []leasetype.JobState{completed, discarded, cancelled} {
				if s != final {
					others = append(others, s)
				}
			}
			first := mustInsertOne(t, exec, keyed("k", others...))
			finishAs(t, exec, "q", final)

			second := mustInsertMany(t, exec, keyed("k", others...))[0]
			if second.UniqueSkipped || second.Job.ID == first.ID {
				t.Fatalf("insert after the holder became %s (UniqueFinished %v): UniqueSkipped=%v ID=%d, want a new job",
					final, others, second.UniqueSkipped, second.Job.ID)
			}
			// The new job holds the key now; the finished one is not returned.
			third := mustInsertMany(t, exec, keyed("k"))[0]
			if !third.UniqueSkipped || third.Job.ID != second.Job.ID {
				t.Errorf("third insert: UniqueSkipped=%v ID=%d, want skipped with the new holder %d (not the %s job %d)",
					third.UniqueSkipped, third.Job.ID, second.Job.ID, final, first.ID)
			}
			if n := countJobs(t, exec, driver.JobListParams{UniqueKey: "k"}); n != 2 {
				t.Errorf("jobs with the key = %d, want 2", n)
			}
		})
	}

	t.Run("FreeAfterCompletedByDefault", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		first := mustInsertOne(t, exec, keyed("k"))
		finishAs(t, exec, "q", completed)
		second := mustInsertMany(t, exec, keyed("k", completed))[0]
		if second.UniqueSkipped || second.Job.ID == first.ID {
			t.Fatalf("insert after a completed job without UniqueFinished: UniqueSkipped=%v ID=%d, want a new job", second.UniqueSkipped, second.Job.ID)
		}
		// The second one asked to keep its key once completed.
		done := finishAs(t, exec, "q", completed)
		if done.ID != second.Job.ID {
			t.Fatalf("finished job %d, want %d", done.ID, second.Job.ID)
		}
		if r := mustInsertMany(t, exec, keyed("k"))[0]; !r.UniqueSkipped || r.Job.ID != done.ID {
			t.Errorf("insert after the second job completed: UniqueSkipped=%v ID=%d, want skipped with ID %d", r.UniqueSkipped, r.Job.ID, done.ID)
		}
	})

	t.Run("HeldWhileUnfinished", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		// UniqueFinished adds states; it takes none away.
		first := mustInsertOne(t, exec, keyed("k", completed))
		if r := mustInsertMany(t, exec, keyed("k"))[0]; !r.UniqueSkipped || r.Job.ID != first.ID {
			t.Errorf("insert while the holder is available: UniqueSkipped=%v ID=%d, want skipped with ID %d", r.UniqueSkipped, r.Job.ID, first.ID)
		}
		mustClaimOne(t, exec, claimParams("q", "w", 1, longTTL))
		if r := mustInsertMany(t, exec, keyed("k"))[0]; !r.UniqueSkipped || r.Job.ID != first.ID {
			t.Errorf("insert while the holder is running: UniqueSkipped=%v ID=%d, want skipped with ID %d", r.UniqueSkipped, r.Job.ID, first.ID)
		}
	})
}
