package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseAudit specifies the audit trail (AuditInsert, AuditList) and the
// bulk actions (JobCount, JobBulk).
func exerciseAudit[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	mustAudit := func(t *testing.T, exec driver.Executor, p *driver.AuditInsertParams) int64 {
		t.Helper()
		id, err := exec.AuditInsert(t.Context(), p)
		if err != nil || id <= 0 {
			t.Fatalf("AuditInsert(%+v) = %d, %v", p, id, err)
		}
		return id
	}
	list := func(t *testing.T, exec driver.Executor, p *driver.AuditListParams) []*leasetype.AuditRow {
		t.Helper()
		rows, err := exec.AuditList(t.Context(), p)
		if err != nil {
			t.Fatalf("AuditList(%+v): %v", p, err)
		}
		return rows
	}
	ids := func(rows []*leasetype.AuditRow) []int64 {
		out := []int64{}
		for _, r := range rows {
			out = append(out, r.ID)
		}
		return out
	}

	t.Run("InsertAndList", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		before := mustNow(t, exec)
		a := mustAudit(t, exec, &driver.AuditInsertParams{Actor: "cli:alice@host", Action: "retry", Queue: "payments", JobID: 42, Count: 1, Note: "ticket 7", Detail: "was discarded"})
		after := mustNow(t, exec)
		bulk := mustAudit(t, exec, &driver.AuditInsertParams{Actor: "token", Action: "bulk_retry", Queue: "payments", JobIDs: []int64{41, 420, 4200}, Count: 3})
		other := mustAudit(t, exec, &driver.AuditInsertParams{Actor: "token", Action: "pause", Queue: "mail", Count: 1})

		all := list(t, exec, &driver.AuditListParams{})
		if !slices.Equal(ids(all), []int64{other, bulk, a}) {
			t.Fatalf("entries = %v, want newest first %v", ids(all), []int64{other, bulk, a})
		}
		got := all[2]
		if got.Actor != "cli:alice@host" || got.Action != "retry" || got.Queue != "payments" || got.JobID != 42 ||
			got.Count != 1 || got.Note != "ticket 7" || got.Detail != "was discarded" || len(got.JobIDs) != 0 {
			t.Fatalf("entry read back as %+v", got)
		}
		assertWithin(t, "entry's time (database clock)", got.At, before, after)
		if !slices.Equal(all[1].JobIDs, []int64{41, 420, 4200}) || all[1].JobID != 0 {
			t.Fatalf("bulk entry's jobs = %v (job %d), want [41 420 4200]", all[1].JobIDs, all[1].JobID)
		}

		// By job: the single-job entry and the bulk batch that holds it,
		// not the batch holding 420 for job 42.
		assertSameIDs(t, "entries of job 42", ids(list(t, exec, &driver.AuditListParams{JobID: 42})), []int64{a})
		assertSameIDs(t, "entries of job 420", ids(list(t, exec, &driver.AuditListParams{JobID: 420})), []int64{bulk})
		assertSameIDs(t, "entries of job 4", ids(list(t, exec, &driver.AuditListParams{JobID: 4})), []int64{})
		assertSameIDs(t, "entries of queue mail", ids(list(t, exec, &driver.AuditListParams{Queue: "mail"})), []int64{other})
		assertSameIDs(t, "entries of actor token", ids(list(t, exec, &driver.AuditListParams{Actor: "token"})), []int64{other, bulk})
		assertSameIDs(t, "paged", ids(list(t, exec, &driver.AuditListParams{BeforeID: other, Limit: 1})), []int64{bulk})
		assertSameIDs(t, "since the future", ids(list(t, exec, &driver.AuditListParams{Since: after.Add(time.Hour)})), []int64{})
		assertSameIDs(t, "since before", ids(list(t, exec, &driver.AuditListParams{Since: before.Add(-time.Second)})), []int64{other, bulk, a})
	})

	// An entry written in a transaction that rolls back is gone with it: the
	// action and its entry commit together or not at all.
	t.Run("InsertRollsBackWithTx", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		tx := mustBegin(t, exec)
		mustAudit(t, tx, &driver.AuditInsertParams{Actor: "a", Action: "retry", JobID: 1})
		mustRollback(t, tx)
		if rows := list(t, exec, &driver.AuditListParams{}); len(rows) != 0 {
			t.Fatalf("after rollback, %d entries, want 0", len(rows))
		}
	})

	bulk := func(t *testing.T, exec driver.Executor, p *driver.JobBulkParams) *driver.JobBulkResult {
		t.Helper()
		res, err := exec.JobBulk(t.Context(), p)
		if err != nil {
			t.Fatalf("JobBulk(%+v): %v", p, err)
		}
		return res
	}
	discarded := func(t *testing.T, exec driver.Executor, queue, kind string, n int) []int64 {
		t.Helper()
		var out []int64
		for range n {
			j := mustInsertOne(t, exec, jobParams(kind, queue))
			setTo(t, exec, j.ID, leasetype.JobStateDiscarded)
			out = append(out, j.ID)
		}
		return out
	}

	// Bulk retry in batches: each batch takes up to Limit matching jobs in
	// ID order above the cursor; other queues, kinds and states stay, and a
	// running job is never touched even when its state is asked for.
	t.Run("BulkRetryBatches", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		want := discarded(t, exec, "pay", "charge", 5)
		otherQueue := discarded(t, exec, "mail", "charge", 1)
		otherKind := discarded(t, exec, "pay", "refund", 1)
		waiting := mustInsertOne(t, exec, jobParams("charge", "pay"))
		mustInsertOne(t, exec, jobParams("charge", "run"))
		running := mustClaimOne(t, exec, claimParams("run", "w", 1, longTTL))

		f := driver.JobFilter{States: []leasetype.JobState{leasetype.JobStateDiscarded}, Queue: "pay", Kind: "charge"}
		n, err := exec.JobCount(t.Context(), &driver.JobCountParams{JobFilter: f})
		if err != nil || n != 5 {
			t.Fatalf("JobCount = %d, %v; want 5", n, err)
		}
		p := &driver.JobBulkParams{JobFilter: f, Limit: 2, State: leasetype.JobStateAvailable, ResetErrors: true, Note: "bulk"}
		var changed []int64
		for batch := 0; ; batch++ {
			if batch > 5 {
				t.Fatalf("bulk did not end after %d batches", batch)
			}
			res := bulk(t, exec, p)
			if res.Examined > 2 || len(res.IDs) > 2 {
				t.Fatalf("batch %d examined %d and changed %d, limit 2", batch, res.Examined, len(res.IDs))
			}
			changed = append(changed, res.IDs...)
			if res.Examined < p.Limit {
				break
			}
			p.AfterID = res.LastID
		}
		assertSameIDs(t, "retried", changed, want)
		for _, id := range want {
			if r := mustGet(t, exec, id); r.State != leasetype.JobStateAvailable || r.LastError != "bulk" || r.Errors != 0 {
				t.Fatalf("job %d after bulk retry: %s, %q, errors %d", id, r.State, r.LastError, r.Errors)
			}
		}
		for _, id := range append(otherQueue, otherKind...) {
			if r := mustGet(t, exec, id); r.State != leasetype.JobStateDiscarded {
				t.Fatalf("job %d outside the filter is %s, want discarded", id, r.State)
			}
		}
		if r := mustGet(t, exec, waiting.ID); r.State != leasetype.JobStateAvailable {
			t.Fatalf("available job is %s", r.State)
		}

		// Running is never touched, even when asked for.
		res := bulk(t, exec, &driver.JobBulkParams{JobFilter: driver.JobFilter{States: []leasetype.JobState{leasetype.JobStateRunning}}, Limit: 100, State: leasetype.JobStateDiscarded})
		if res.Examined != 0 || len(res.IDs) != 0 {
			t.Fatalf("bulk of running jobs examined %d, changed %v; want none", res.Examined, res.IDs)
		}
		res = bulk(t, exec, &driver.JobBulkParams{Limit: 100, Delete: true, JobFilter: driver.JobFilter{Queue: "run"}})
		if len(res.IDs) != 0 {
			t.Fatalf("bulk delete of queue run deleted %v; its only job is running", res.IDs)
		}
		if r := mustGet(t, exec, running.ID); r.State != leasetype.JobStateRunning {
			t.Fatalf("running job is %s", r.State)
		}
	})

	// A job whose retry would take a unique key another job holds is
	// skipped and reported; the rest of the batch is retried.
	t.Run("BulkRetryUniqueConflict", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		keyed := jobParams("k", "q")
		keyed.UniqueKey = "order-9"
		old := mustInsertOne(t, exec, keyed)
		setTo(t, exec, old.ID, leasetype.JobStateCancelled)
		plain := mustInsertOne(t, exec, jobParams("k", "q"))
		setTo(t, exec, plain.ID, leasetype.JobStateCancelled)
		mustInsertOne(t, exec, keyed) // holds order-9 now

		res := bulk(t, exec, &driver.JobBulkParams{
			JobFilter: driver.JobFilter{States: []leasetype.JobState{leasetype.JobStateCancelled}, Queue: "q"},
			Limit:     100, State: leasetype.JobStateAvailable, ResetErrors: true,
		})
		assertSameIDs(t, "retried", res.IDs, []int64{plain.ID})
		assertSameIDs(t, "conflicts", res.Conflicts, []int64{old.ID})
		if res.Examined != 2 {
			t.Fatalf("examined %d, want 2", res.Examined)
		}
		if r := mustGet(t, exec, old.ID); r.State != leasetype.JobStateCancelled {
			t.Fatalf("conflicting job is %s, want cancelled", r.State)
		}
		if r := mustGet(t, exec, plain.ID); r.State != leasetype.JobStateAvailable {
			t.Fatalf("plain job is %s, want available", r.State)
		}
	})

	// Bulk delete removes what matches, older-than filters by creation time
	// on the database clock, and a batch inside a transaction that rolls
	// back changes nothing.
	t.Run("BulkDeleteOlderThanAndRollback", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		old := discarded(t, exec, "q", "k", 2)
		waitPast(t, exec, mustNow(t, exec).Add(300*time.Millisecond))
		fresh := discarded(t, exec, "q", "k", 1)
		f := driver.JobFilter{States: []leasetype.JobState{leasetype.JobStateDiscarded}, OlderThan: 250 * time.Millisecond}
		if n, err := exec.JobCount(t.Context(), &driver.JobCountParams{JobFilter: f}); err != nil || n != 2 {
			t.Fatalf("JobCount older than 250ms = %d, %v; want 2", n, err)
		}

		tx := mustBegin(t, exec)
		res := bulk(t, tx, &driver.JobBulkParams{JobFilter: f, Limit: 100, Delete: true})
		assertSameIDs(t, "deleted in the rolled-back tx", res.IDs, old)
		mustRollback(t, tx)
		if n := countJobs(t, exec, driver.JobListParams{}); n != 3 {
			t.Fatalf("after rollback %d jobs, want 3", n)
		}

		res = bulk(t, exec, &driver.JobBulkParams{JobFilter: f, Limit: 100, Delete: true})
		assertSameIDs(t, "deleted", res.IDs, old)
		_, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: old[0]})
		assertNotFound(t, "JobGet of a deleted job", err)
		mustGet(t, exec, fresh[0])
	})

	t.Run("BulkRefusesBadParams", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		for _, p := range []*driver.JobBulkParams{
			{Limit: 0, State: leasetype.JobStateAvailable},
			{Limit: 10, State: leasetype.JobStateRunning},
			{Limit: 10, State: "nope"},
		} {
			if _, err := exec.JobBulk(t.Context(), p); err == nil {
				t.Fatalf("JobBulk(%+v) = nil error", p)
			}
		}
	})
}

// setTo moves job id to state with JobSetState from any state but running.
func setTo(t *testing.T, exec driver.Executor, id int64, state leasetype.JobState) {
	t.Helper()
	_, changed, err := exec.JobSetState(t.Context(), &driver.JobSetStateParams{ID: id, FromStates: driver.NotRunningStates(), State: state})
	if err != nil || !changed {
		t.Fatalf("JobSetState(%d to %s) = %v, %v", id, state, changed, err)
	}
}
