package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// jobRules are the rules of the job table that migration 13 moved from CHECK
// constraints to triggers: a column, a value that breaks the rule, and the
// constraint the error names.
var jobRules = []struct {
	column, value, constraint string
}{
	{"kind", "''", "leasehold_job_kind_check"},
	{"kind", "repeat('k', 129)", "leasehold_job_kind_check"},
	{"queue", "''", "leasehold_job_queue_check"},
	{"priority", "0", "leasehold_job_priority_check"},
	{"priority", "5", "leasehold_job_priority_check"},
	{"max_attempts", "0", "leasehold_job_max_attempts_check"},
	{"lease_ttl_ms", "0", "leasehold_job_lease_ttl_ms_check"},
	// expiry_policy's rule stays a CHECK (the claim sets the column); it is
	// here because version 13 must keep it.
	{"expiry_policy", "'never'", "leasehold_job_expiry_policy_check"},
	{"unique_finished", "8", "leasehold_job_unique_finished_check"},
	{"flow_key", "''", "leasehold_job_flow_key_check"},
	{"sequence_key", "repeat('s', 257)", "leasehold_job_sequence_key_check"},
	{"stage", "''", "leasehold_job_stage_check"},
	{"dependency_policy", "'sometimes'", "leasehold_job_dependency_policy_check"},
}

// ruleInsert returns an insert of one valid job, with column set to value
// (SQL) instead when column is not empty.
func ruleInsert(column, value string) string {
	cols := map[string]string{
		"kind": "'k'", "queue": "'q'", "priority": "1", "max_attempts": "3",
		"lease_ttl_ms": "NULL", "expiry_policy": "'retry'", "unique_finished": "0",
		"flow_key": "NULL", "sequence_key": "NULL", "stage": "NULL", "dependency_policy": "'cancel'",
	}
	if column != "" {
		cols[column] = value
	}
	names := []string{"kind", "queue", "priority", "max_attempts", "lease_ttl_ms", "expiry_policy",
		"unique_finished", "flow_key", "sequence_key", "stage", "dependency_policy"}
	q, v := "INSERT INTO leasehold_job (args", ") VALUES ('{}'"
	for _, n := range names {
		q += ", " + n
		v += ", " + cols[n]
	}
	return q + v + ")"
}

// wantCheckViolation fails t unless err is a check violation naming
// constraint.
func wantCheckViolation(t *testing.T, what string, err error, constraint string) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		t.Errorf("%s: error %v, want a check violation of %s", what, err, constraint)
		return
	}
	if pgErr.Code != "23514" || pgErr.ConstraintName != constraint {
		t.Errorf("%s: SQLSTATE %s constraint %q (%s), want 23514 constraint %q", what, pgErr.Code, pgErr.ConstraintName, pgErr.Message, constraint)
	}
}

// countJobs returns how many jobs the table holds.
func countJobs(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM leasehold_job").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkJobRules checks that every rule of jobRules refuses a plain insert,
// a multi-row insert, COPY and an update, writing nothing.
func checkJobRules(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	ctx := t.Context()
	if _, err := pool.Exec(ctx, ruleInsert("", "")); err != nil {
		t.Fatalf("valid insert: %v", err)
	}
	before := countJobs(t, pool)
	var id int64
	if err := pool.QueryRow(ctx, "SELECT max(id) FROM leasehold_job").Scan(&id); err != nil {
		t.Fatal(err)
	}
	for _, r := range jobRules {
		_, err := pool.Exec(ctx, ruleInsert(r.column, r.value))
		wantCheckViolation(t, "insert "+r.column+" = "+r.value, err, r.constraint)
		// One bad row among good ones fails the whole statement.
		_, err = pool.Exec(ctx, ruleInsert("", "")+"; "+ruleInsert(r.column, r.value))
		wantCheckViolation(t, "batch with "+r.column+" = "+r.value, err, r.constraint)
		_, err = pool.Exec(ctx, "UPDATE leasehold_job SET "+r.column+" = "+r.value+" WHERE id = $1", id)
		wantCheckViolation(t, "update "+r.column+" = "+r.value, err, r.constraint)
	}
	_, err := pool.Exec(ctx, `INSERT INTO leasehold_job (kind, queue, args, max_attempts)
		SELECT 'k', CASE WHEN g = 50 THEN '' ELSE 'q' END, '{}', 3 FROM generate_series(1, 100) g`)
	wantCheckViolation(t, "insert of 100 rows, one with an empty queue", err, "leasehold_job_queue_check")
	rows := [][]any{{"k", "q", []byte("{}"), int32(3)}, {"k", "q", []byte("{}"), int32(0)}}
	_, err = pool.CopyFrom(ctx, pgx.Identifier{"leasehold_job"}, []string{"kind", "queue", "args", "max_attempts"}, pgx.CopyFromRows(rows))
	wantCheckViolation(t, "COPY with max_attempts 0", err, "leasehold_job_max_attempts_check")
	if n := countJobs(t, pool); n != before {
		t.Errorf("jobs after the refused writes = %d, want %d", n, before)
	}
	// The values at the rules' bounds are kept.
	for _, set := range []string{"kind = repeat('k', 128)", "priority = 4", "lease_ttl_ms = 1",
		"flow_key = repeat('f', 256)", "stage = NULL", "unique_finished = 7", "expiry_policy = 'stuck'"} {
		if _, err := pool.Exec(ctx, "UPDATE leasehold_job SET "+set+" WHERE id = $1", id); err != nil {
			t.Errorf("update %s: %v", set, err)
		}
	}
}

// TestJobRulesAcrossMigration13 checks that the job table's rules hold the
// same at versions 12 (CHECK constraints) and 13 (triggers), down and up
// again, and that version 13 leaves the table two CHECKs (state and
// expiry_policy, which the claim sets).
func TestJobRulesAcrossMigration13(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := newSchemaPool(t)
	m := migrate.New(New(pool))
	checks := func() []string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT conname FROM pg_constraint
			WHERE conrelid = 'leasehold_job'::regclass AND contype = 'c' ORDER BY conname`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	for _, step := range []struct {
		name   string
		run    func(context.Context) ([]int, error)
		checks int
	}{
		{"up to 12", func(ctx context.Context) ([]int, error) { return m.UpTo(ctx, 12) }, 12},
		{"up to 13", func(ctx context.Context) ([]int, error) { return m.UpTo(ctx, 13) }, 2},
		{"down to 12", func(ctx context.Context) ([]int, error) { return m.DownTo(ctx, 12) }, 12},
		{"up to 13 again", func(ctx context.Context) ([]int, error) { return m.UpTo(ctx, 13) }, 2},
	} {
		if _, err := step.run(ctx); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		got := checks()
		if len(got) != step.checks || !slices.Contains(got, "leasehold_job_state_check") || !slices.Contains(got, "leasehold_job_expiry_policy_check") {
			t.Fatalf("%s: CHECK constraints %q, want %d with the state and expiry_policy checks", step.name, got, step.checks)
		}
		for _, r := range jobRules {
			if step.checks > 2 && !slices.Contains(got, r.constraint) {
				t.Errorf("%s: no constraint %s", step.name, r.constraint)
			}
		}
		checkJobRules(t, pool)
		if t.Failed() {
			t.Fatalf("rules broken %s", step.name)
		}
	}
}

// TestJobTriggersOffTheLeasePath checks that no trigger function of the job
// table runs for the claim, heartbeat and outcome statements (their WHEN
// conditions and column lists keep them out), keyed jobs included, and
// that the rules' update trigger runs for an update that sets one of its
// columns.
func TestJobTriggersOffTheLeasePath(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	insertKeyed(t, d, "q", []string{"a", "b", ""}, 2)
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// track_functions counts the calls of plpgsql functions in
	// pg_stat_xact_user_functions, for this transaction.
	if _, err := tx.Exec(ctx, "SET LOCAL track_functions = 'pl'"); err != nil {
		t.Fatal(err)
	}
	calls := func() map[string]int64 {
		t.Helper()
		rows, err := tx.Query(ctx, `SELECT funcname, calls FROM pg_stat_xact_user_functions
			WHERE funcname LIKE 'leasehold%'`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		var (
			name string
			n    int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error { out[name] = n; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	txExec := d.UnwrapExecutor(tx)
	jobs, err := txExec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 6, Owner: "w", DefaultLeaseTTL: time.Hour})
	if err != nil || len(jobs) != 6 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	if _, err := txExec.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Owner: "w", Leases: []driver.LeaseRenewal{
		{ID: jobs[0].ID, Token: jobs[0].LeaseToken, TTL: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	var items []*driver.JobFinish
	for i, j := range jobs[:5] {
		it := &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
		if i%2 == 1 {
			it.State, it.Outcome, it.Error, it.CountError = leasetype.JobStateRetryable, leasetype.OutcomeFailed, "e", true
		}
		items = append(items, it)
	}
	if done, err := txExec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: items}); err != nil || len(done) != 5 {
		t.Fatalf("finish: %v, %v", done, err)
	}
	if done, err := txExec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{{
		ID: jobs[5].ID, Token: jobs[5].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}}}); err != nil || len(done) != 1 {
		t.Fatalf("complete one: %v, %v", done, err)
	}
	if got := calls(); len(got) != 0 {
		t.Errorf("trigger functions called by claim, heartbeat and outcomes: %v, want none", got)
	}
	if _, err := tx.Exec(ctx, "UPDATE leasehold_job SET priority = 2 WHERE id = $1", jobs[1].ID); err != nil {
		t.Fatal(err)
	}
	if got := calls(); got["leasehold_job_rules_updated"] != 1 || len(got) != 1 {
		t.Errorf("trigger functions called by an update of priority: %v, want leasehold_job_rules_updated once", got)
	}
}

// TestJobTriggersAtLatestVersion checks what the update triggers that
// migration 13 rewrote do: a job moved to another queue brings its key
// there, a completed job that runs again brings its key back, and a
// completed job's lease held in its row goes to the attempt log when the
// row changes, shown once either way.
func TestJobTriggersAtLatestVersion(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	pool := d.Pool()
	insertKeyed(t, d, "q", []string{"a", "b"}, 1)
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 2, Owner: "w", DefaultLeaseTTL: time.Hour})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	byKey := map[string]*leasetype.JobRow{}
	for _, j := range jobs {
		byKey[j.Key] = j
	}
	a, b := byKey["a"], byKey["b"]
	if a == nil || b == nil {
		t.Fatalf("claimed keys %v, want a and b", byKey)
	}
	if _, err := pool.Exec(ctx, "UPDATE leasehold_job SET queue = 'moved' WHERE id = $1", b.ID); err != nil {
		t.Fatal(err)
	}
	if got := queueKeys(t, d); !slices.Contains(got, "moved/b") {
		t.Errorf("keys after job b moved to queue moved: %v, want moved/b among them", got)
	}
	if done, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{{
		ID: a.ID, Token: a.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}}}); err != nil || len(done) != 1 {
		t.Fatalf("complete job a: %v, %v", done, err)
	}
	history := attemptHistory(t, exec, []int64{a.ID})
	if len(history) != 1 || logRows(t, d, a.ID) != 0 {
		t.Fatalf("history of completed job a = %q with %d log rows, want one attempt held by the row", history, logRows(t, d, a.ID))
	}
	// An update that moves nothing may move the lease to the log: the
	// history stays the same.
	if _, err := pool.Exec(ctx, "UPDATE leasehold_job SET state = 'completed' WHERE id = $1", a.ID); err != nil {
		t.Fatal(err)
	}
	if got := attemptHistory(t, exec, []int64{a.ID}); !slices.Equal(got, history) {
		t.Errorf("history after a no-op update = %q, want %q", got, history)
	}
	if _, err := pool.Exec(ctx, "DELETE FROM leasehold_queue_key WHERE flow_key = 'a'"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE leasehold_job SET state = 'available', finalized_at = NULL WHERE id = $1", a.ID); err != nil {
		t.Fatal(err)
	}
	if got := queueKeys(t, d); !slices.Contains(got, "q/a") {
		t.Errorf("keys after completed job a is available again: %v, want q/a among them", got)
	}
	var marked bool
	if err := pool.QueryRow(ctx, "SELECT completion_in_row FROM leasehold_job WHERE id = $1", a.ID).Scan(&marked); err != nil || marked {
		t.Errorf("job a available again: completion_in_row %v, %v; want false", marked, err)
	}
	if got := attemptHistory(t, exec, []int64{a.ID}); !slices.Equal(got, history) || logRows(t, d, a.ID) != 1 {
		t.Errorf("history of job a available again = %q with %d log rows, want %q in the log", got, logRows(t, d, a.ID), history)
	}
}
