package postgres

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// completeOneV11SQL is the completion that binaries knowing schema version
// 10 or 11 send: the job row's update and an insert into leasehold_attempt,
// a table up to version 11 and a view since 12.
var completeOneV11SQL = strings.Replace(completeOneAttemptRowSQL,
	"INSERT INTO leasehold_attempt_log", "INSERT INTO leasehold_attempt", 1)

// TestAttemptHistoryAcrossMigration12 checks that the attempt history shows
// every lease once through migration 12, up, down and up again: leases
// that completed their job before it (attempt rows), after it (held by the
// job row), completed by an older binary after it (through the view's
// insert trigger), completed then retried by an operator or by plain SQL,
// and completed then deleted.
func TestAttemptHistoryAcrossMigration12(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := New(newSchemaPool(t))
	m := migrate.New(d)
	if _, err := m.UpTo(ctx, 11); err != nil {
		t.Fatalf("migrate up to 11: %v", err)
	}
	exec := d.GetExecutor()
	insertJobs(t, exec, "q", 8)
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 8, Owner: "w", DefaultLeaseTTL: time.Hour})
	if err != nil || len(jobs) != 8 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	completeV11 := func(j *leasetype.JobRow) {
		t.Helper()
		var id int64
		if err := d.Pool().QueryRow(ctx, completeOneV11SQL, j.ID, j.LeaseToken, "w").Scan(&id); err != nil || id != j.ID {
			t.Fatalf("complete job %d as version 11 does: returned %d, %v", j.ID, id, err)
		}
	}
	complete := func(j *leasetype.JobRow) {
		t.Helper()
		done, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{{
			ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}}})
		if err != nil || len(done) != 1 {
			t.Fatalf("complete job %d: %v, %v", j.ID, done, err)
		}
	}

	// Version 11: an attempt row per completion.
	completeV11(jobs[0])
	completeV11(jobs[1])
	v11 := attemptHistory(t, exec, ids)

	if _, err := m.UpTo(ctx, 12); err != nil {
		t.Fatalf("migrate up to 12: %v", err)
	}
	if got := attemptHistory(t, exec, ids); !slices.Equal(got, v11) {
		t.Fatalf("history changed by migration 12:\n got %q\nwant %q", got, v11)
	}
	complete(jobs[2])    // held by its row
	completeV11(jobs[3]) // an older binary, through the view
	complete(jobs[4])
	complete(jobs[5])
	if n := logRows(t, d, jobs[2].ID, jobs[4].ID, jobs[5].ID); n != 0 {
		t.Errorf("attempt log rows of completions at version 12 = %d, want 0 (the job rows hold them)", n)
	}
	if n := logRows(t, d, jobs[3].ID); n != 1 {
		t.Errorf("attempt log rows of the older binary's completion = %d, want 1", n)
	}
	for _, i := range []int{2, 3} {
		if got := attemptHistory(t, exec, ids[i:i+1]); len(got) != 1 || !strings.Contains(got[0], "/completed/") {
			t.Errorf("history of job %d = %q, want one completed attempt", ids[i], got)
		}
	}

	// An operator retries job 2 and it completes again: two attempts.
	if _, ok, err := exec.JobSetState(ctx, &driver.JobSetStateParams{ID: jobs[2].ID,
		FromStates: []leasetype.JobState{leasetype.JobStateCompleted}, State: leasetype.JobStateAvailable}); err != nil || !ok {
		t.Fatalf("retry job %d: %v, %v", jobs[2].ID, ok, err)
	}
	again, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1, Owner: "w", DefaultLeaseTTL: time.Hour})
	if err != nil || len(again) != 1 || again[0].ID != jobs[2].ID {
		t.Fatalf("claim the retried job: %v, %v", again, err)
	}
	complete(again[0])
	if got := attemptHistory(t, exec, ids[2:3]); len(got) != 2 || !strings.Contains(got[0], "/completed/") || !strings.Contains(got[1], "/completed/") {
		t.Errorf("history of the retried job = %q, want two completed attempts", got)
	}
	// Plain SQL (or an older binary) moves job 7 out of completed without
	// clearing the mark: the trigger logs the lease and clears it.
	complete(jobs[7])
	if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET state = 'available', finalized_at = NULL WHERE id = $1", jobs[7].ID); err != nil {
		t.Fatalf("retry job %d by SQL: %v", jobs[7].ID, err)
	}
	var marked bool
	if err := d.Pool().QueryRow(ctx, "SELECT completion_in_row FROM leasehold_job WHERE id = $1", jobs[7].ID).Scan(&marked); err != nil || marked {
		t.Errorf("job %d retried by SQL: completion_in_row %v, %v; want false", jobs[7].ID, marked, err)
	}
	if n := logRows(t, d, jobs[7].ID); n != 1 {
		t.Errorf("attempt log rows of job %d retried by SQL = %d, want 1", jobs[7].ID, n)
	}
	again, err = exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1, Owner: "w", DefaultLeaseTTL: time.Hour})
	if err != nil || len(again) != 1 || again[0].ID != jobs[7].ID {
		t.Fatalf("claim job %d again: %v, %v", jobs[7].ID, again, err)
	}
	complete(again[0])

	// Job 4 is deleted by plain SQL, then the pruner deletes every
	// completed job in one statement (some with log rows, some not, job 2
	// with both): their leases stay. Job 6 completes after that and keeps
	// its lease in its row.
	if _, err := d.Pool().Exec(ctx, "DELETE FROM leasehold_job WHERE id = $1", jobs[4].ID); err != nil {
		t.Fatalf("delete job %d: %v", jobs[4].ID, err)
	}
	if n, err := exec.JobPrune(ctx, &driver.JobPruneParams{States: []leasetype.JobState{leasetype.JobStateCompleted}, Limit: 10}); err != nil || n != 6 {
		t.Fatalf("prune: %d jobs, %v; want 6", n, err)
	}
	complete(jobs[6])
	v12 := attemptHistory(t, exec, ids)
	if len(v12) != 10 {
		t.Fatalf("history at version 12 = %q, want 10 attempts", v12)
	}
	for _, id := range ids {
		if got := attemptHistory(t, exec, []int64{id}); len(got) == 0 {
			t.Errorf("job %d has no attempt", id)
		}
	}

	if _, err := m.DownTo(ctx, 11); err != nil {
		t.Fatalf("migrate down to 11: %v", err)
	}
	if got := attemptHistory(t, exec, ids); !slices.Equal(got, v12) {
		t.Errorf("history after migrating down to 11:\n got %q\nwant %q", got, v12)
	}
	if _, err := m.Up(ctx); err != nil {
		t.Fatalf("migrate up again: %v", err)
	}
	if got := attemptHistory(t, exec, ids); !slices.Equal(got, v12) {
		t.Errorf("history after migrating up again:\n got %q\nwant %q", got, v12)
	}
}

// TestAttemptOfLeasesReadsByKey checks that the read confirming CompleteTx
// commits probes both of the history's places by key, whatever the number
// of completed jobs: no branch scans the job table or the log.
func TestAttemptOfLeasesReadsByKey(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	insertJobs(t, exec, "q", 5000)
	for {
		jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1000, Owner: "w", DefaultLeaseTTL: time.Hour})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(jobs) == 0 {
			break
		}
		items := make([]*driver.JobFinish, len(jobs))
		for i, j := range jobs {
			items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
			if i%2 == 0 {
				items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "x", CountError: true}
			}
		}
		if _, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: items}); err != nil {
			t.Fatalf("finish: %v", err)
		}
		if len(jobs) < 1000 {
			break
		}
	}
	if _, err := d.Pool().Exec(ctx, "ANALYZE leasehold_job; ANALYZE leasehold_attempt_log"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	for name, sql := range map[string]string{
		"of leases": strings.NewReplacer("$1", "'{1,2,3}'", "$2", "'{1,1,1}'").Replace(jobAttemptsOfLeasesSQL),
		"of a job":  strings.ReplaceAll(jobAttemptsSQL, "$1", "7"),
	} {
		plan := explain(t, conn, "EXPLAIN "+sql)
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("attempts %s: a branch scans a table:\n%s", name, plan)
		}
	}
}

// attemptHistory returns the attempts of the jobs ids, one string each
// ("job/token/outcome/owner/leased/until/finished"), in job and token order.
func attemptHistory(t *testing.T, exec driver.Executor, ids []int64) []string {
	t.Helper()
	var out []string
	for _, id := range ids {
		rows, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: id})
		if err != nil {
			t.Fatalf("attempts of job %d: %v", id, err)
		}
		for _, a := range rows {
			out = append(out, fmt.Sprintf("%d/%d/%s/%s/%s/%s/%s", a.JobID, a.Token, a.Outcome, a.Owner,
				a.LeasedAt.UTC().Format(time.RFC3339Nano), a.LeaseUntil.UTC().Format(time.RFC3339Nano),
				a.FinishedAt.UTC().Format(time.RFC3339Nano)))
		}
	}
	return out
}

// logRows counts the attempt log's rows of the jobs ids.
func logRows(t *testing.T, d *Driver, ids ...int64) int {
	t.Helper()
	var n int
	if err := d.Pool().QueryRow(t.Context(), "SELECT count(*) FROM leasehold_attempt_log WHERE job_id = ANY($1)", ids).Scan(&n); err != nil {
		t.Fatalf("count log rows: %v", err)
	}
	return n
}
