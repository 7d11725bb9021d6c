package drivertest

import (
	"context"
	"errors"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

// exerciseExecutor specifies the transactions an executor starts itself
// (Begin, nested savepoints, Commit, Rollback) and ErrClosed.
func exerciseExecutor[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	begin := func(t *testing.T, exec driver.Executor) driver.ExecutorTx {
		t.Helper()
		tx, err := exec.Begin(t.Context())
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return tx
	}

	t.Run("BeginCommit", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		tx := begin(t, exec)
		job := mustInsertOne(t, tx, jobParams("k", "q"))
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if err := tx.Rollback(t.Context()); err != nil {
			t.Errorf("Rollback after Commit: %v, want nil (a no-op)", err)
		}
		assertUnchanged(t, exec, "committed job", job)
	})

	t.Run("BeginRollback", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		tx := begin(t, exec)
		job := mustInsertOne(t, tx, jobParams("k", "q"))
		if err := tx.Rollback(t.Context()); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: job.ID})
		assertNotFound(t, "JobGet of a rolled-back job", err)
	})

	t.Run("ClosedAfterCommit", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		tx := begin(t, exec)
		job := mustInsertOne(t, tx, jobParams("k", "q"))
		if err := tx.Commit(t.Context()); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if _, err := tx.JobGet(t.Context(), &driver.JobGetParams{ID: job.ID}); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("JobGet on a committed transaction: got %v, want driver.ErrClosed", err)
		}
		if _, err := tx.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{jobParams("k", "q")}}); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("JobInsertMany on a committed transaction: got %v, want driver.ErrClosed", err)
		}
		if n := countJobs(t, exec, driver.JobListParams{}); n != 1 {
			t.Errorf("jobs = %d, want 1", n)
		}
	})

	t.Run("ClosedAfterRollback", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		outer := begin(t, exec)
		inner := begin(t, outer)
		if err := outer.Rollback(t.Context()); err != nil {
			t.Fatalf("Rollback: %v", err)
		}
		if _, err := outer.JobList(t.Context(), &driver.JobListParams{}); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("JobList on a rolled-back transaction: got %v, want driver.ErrClosed", err)
		}
		if _, err := inner.JobList(t.Context(), &driver.JobListParams{}); !errors.Is(err, driver.ErrClosed) {
			t.Errorf("JobList in a savepoint of a rolled-back transaction: got %v, want driver.ErrClosed", err)
		}
		// The pool is usable again (on SQLite the write lock was released).
		mustInsertOne(t, exec, jobParams("k", "q"))
	})

	t.Run("NestedRollbackKeepsOuter", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		outer := begin(t, exec)
		kept := mustInsertOne(t, outer, jobParams("kept", "q"))
		inner := begin(t, outer)
		dropped := mustInsertOne(t, inner, jobParams("dropped", "q"))
		if err := inner.Rollback(t.Context()); err != nil {
			t.Fatalf("inner Rollback: %v", err)
		}
		if _, err := outer.JobGet(t.Context(), &driver.JobGetParams{ID: dropped.ID}); !errors.Is(err, driver.ErrNotFound) {
			t.Errorf("outer transaction sees the rolled-back savepoint's job: err = %v", err)
		}
		if err := outer.Commit(t.Context()); err != nil {
			t.Fatalf("outer Commit: %v", err)
		}
		assertUnchanged(t, exec, "job of the outer transaction", kept)
		_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: dropped.ID})
		assertNotFound(t, "JobGet of the savepoint's job", err)
	})

	t.Run("NestedCommitUndoneByOuterRollback", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		outer := begin(t, exec)
		inner := begin(t, outer)
		job := mustInsertOne(t, inner, jobParams("k", "q"))
		if err := inner.Commit(t.Context()); err != nil {
			t.Fatalf("inner Commit: %v", err)
		}
		mustGet(t, outer, job.ID)
		if err := outer.Rollback(t.Context()); err != nil {
			t.Fatalf("outer Rollback: %v", err)
		}
		if n := countJobs(t, exec, driver.JobListParams{}); n != 0 {
			t.Errorf("jobs after the outer rollback = %d, want 0", n)
		}
	})

	t.Run("SavepointInUserTx", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		tx, txExec := userTx(t, b, d)
		sp := begin(t, txExec)
		mustInsertOne(t, sp, jobParams("dropped", "q"))
		if err := sp.Rollback(t.Context()); err != nil {
			t.Fatalf("savepoint Rollback: %v", err)
		}
		// The next job may reuse the rolled-back job's ID (SQLite does), so
		// look the jobs up by kind.
		kept := mustInsertOne(t, txExec, jobParams("kept", "q"))
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		exec := d.GetExecutor()
		assertUnchanged(t, exec, "job inserted after the savepoint", kept)
		if n := countJobs(t, exec, driver.JobListParams{Kind: "dropped"}); n != 0 {
			t.Errorf("jobs inserted under the rolled-back savepoint = %d, want 0", n)
		}
	})

	t.Run("Exec", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		if err := exec.Exec(t.Context(), "SELECT 1; SELECT 2"); err != nil {
			t.Errorf("Exec of two statements: %v", err)
		}
		if err := exec.Exec(t.Context(), "THIS IS NOT SQL"); err == nil {
			t.Errorf("Exec of invalid SQL: got no error")
		}
	})
}
