package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestClaimPlan guards the claim's plan: with or without the kind filters,
// as a custom plan and as the generic plan the driver has the server cache
// (jobClaimPlanSQL's settings), on a queue of a few hundred jobs and on one
// of 20,000, the claim walks the claim index in claim order, and updates the
// rows it locked by their address. The kind filters must not turn it into a
// scan and a sort. (Without the settings the generic plan of the large
// queue sorts all of it: a LIMIT given as a parameter is taken for a tenth
// of the rows.)
func TestClaimPlan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	insertJobs(t, d.GetExecutor(), "big", 20000)
	seedPlanJobs(t, d)
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "PREPARE claim AS "+jobClaimSQL); err != nil {
		t.Fatalf("prepare claim: %v", err)
	}
	for _, mode := range []string{"custom", "driver's generic"} {
		for _, queue := range []string{"q0", "big"} {
			for _, tc := range []struct{ name, kinds, exclude string }{
				{"plain", "{}", "{}"},
				{"kinds", "{k1,k2}", "{}"},
				{"exclude kinds", "{}", "{k3}"},
			} {
				name := fmt.Sprintf("%s, %s, %s", mode, queue, tc.name)
				plan := explainClaim(t, conn, mode == "custom", fmt.Sprintf(
					`EXPLAIN EXECUTE claim('%s', 10, 'owner', '{}', '{}', 60000, '{}', '%s', '%s', 0, '-infinity', 0)`,
					queue, tc.kinds, tc.exclude))
				if !strings.Contains(plan, "Index Scan using leasehold_job_claim_idx") || strings.Contains(plan, "Sort") {
					t.Errorf("%s: claim plan does not walk the claim index:\n%s", name, plan)
				}
				if !hasLine(plan, "Index Cond:", "ROW(priority, scheduled_at, id) > ROW(") {
					t.Errorf("%s: claim plan does not start the index scan at the position:\n%s", name, plan)
				}
				if !strings.Contains(plan, "Tid Scan on leasehold_job") {
					t.Errorf("%s: claim plan does not update the locked rows by address:\n%s", name, plan)
				}
				if tidScanPerRow(plan) {
					t.Errorf("%s: claim plan finds the locked rows by address one at a time:\n%s", name, plan)
				}
			}
		}
	}
}

// explainClaim runs an EXPLAIN of the prepared claim in a transaction of
// its own, as a custom plan or with jobClaimPlanSQL's settings, as the
// driver sends it.
func explainClaim(t *testing.T, conn *pgxpool.Conn, custom bool, sql string) string {
	t.Helper()
	ctx := t.Context()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // only read
	setting := jobClaimPlanSQL
	if custom {
		setting = `SET LOCAL plan_cache_mode = force_custom_plan`
	}
	if _, err := tx.Exec(ctx, setting); err != nil {
		t.Fatalf("plan settings: %v", err)
	}
	rows, err := tx.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}

// TestClaimPlannedOnce: the server plans the claim once per connection and
// runs the cached plan after that (jobClaimPlanSQL), whether the claim goes
// alone or in a batch with outcomes or attempt reads. Without the settings
// it plans every claim anew (custom plans).
func TestClaimPlannedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := resized(t, newTestDriver(t), 1) // every statement on one connection
	exec := d.GetExecutor()
	insertJobs(t, exec, "q0", 2000)
	if _, err := d.Pool().Exec(ctx, "ANALYZE leasehold_job"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	const claims = 12
	var held []*leasetype.JobRow
	for i := range claims {
		claim := &driver.JobClaimParams{Queue: "q0", Max: 5, Owner: "w", DefaultLeaseTTL: time.Hour}
		var (
			rows []*leasetype.JobRow
			err  error
		)
		switch {
		case i%3 == 1 && len(held) > 0:
			finish := &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{{
				ID: held[0].ID, Token: held[0].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}}}
			_, rows, err = exec.(driver.FinishClaimer).JobFinishAndClaim(ctx, finish, claim)
			held = held[1:]
		case i%3 == 2 && len(held) > 0:
			attempts := &driver.JobAttemptsParams{Leases: []driver.LeaseRef{{ID: held[0].ID, Token: held[0].LeaseToken}}}
			_, rows, err = exec.(driver.AttemptsClaimer).JobAttemptsAndClaim(ctx, attempts, claim)
		default:
			rows, err = exec.JobClaim(ctx, claim)
		}
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if len(rows) != 5 {
			t.Fatalf("claim %d: %d jobs, want 5", i, len(rows))
		}
		held = append(held, rows...)
	}
	var generic, custom int64
	err := d.Pool().QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0)
		FROM pg_prepared_statements
		WHERE statement LIKE '%picked_ctid%' AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&generic, &custom)
	if err != nil {
		t.Fatalf("read prepared statements: %v", err)
	}
	if custom != 0 || generic != claims {
		t.Fatalf("claims ran %d generic and %d custom plans, want %d generic, 0 custom (planned once)", generic, custom, claims)
	}
}

// TestOutcomePlansBoundTheRunningScan guards the plans of the outcome and
// heartbeat statements:
// as custom and as generic plans, every scan of the job table has an index
// condition on id. The running index is scanned in id order, and its head
// holds the entries of jobs that left running state (until vacuum removes
// them); a scan of the whole index, which the planner picks to build the
// hash of running rows, walks that head on every batch, and the walk grows
// as a backlog drains. The ids' range bounds the scan to the batch.
//
// The statistics are taken before any job runs, as when a backlog was
// inserted and analyzed and then drains: the planner then expects one
// running row, and without the bound it scans the whole running index.
func TestOutcomePlansBoundTheRunningScan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	analyzedThenClaimed(t, d, "q0", 5000, 2000)
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	for name, sql := range map[string]string{"complete": jobCompleteSQL, "finish": jobFinishSQL, "heartbeat": jobHeartbeatSQL,
		"complete_bounded": boundedFinishSQL[jobCompleteSQL], "finish_bounded": boundedFinishSQL[jobFinishSQL],
		"complete_one": jobCompleteOneSQL, "complete_one_bounded": boundedFinishSQL[jobCompleteOneSQL]} {
		if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+sql); err != nil {
			t.Fatalf("prepare %s: %v", name, err)
		}
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatalf("set plan_cache_mode: %v", err)
		}
		for name, args := range map[string]string{
			"complete":     `'{1,2,3}', '{1,1,1}', 'w'`,
			"complete_one": `1, 1, 'w'`,
			"heartbeat":    `'{1,2,3}', '{1,1,1}', '{30000,30000,30000}', 'w'`,
			"finish":       `'{1,2,3}', '{1,1,1}', '{completed,completed,retryable}', '{completed,completed,failed}', '{NULL,NULL,NULL}', '{"","",boom}', '{f,f,t}', 'w'`,
			// EXPLAIN without ANALYZE runs nothing: no bound is set.
			"complete_bounded":     `'{1,2,3}', '{1,1,1}', 'w', 30000`,
			"complete_one_bounded": `1, 1, 'w', 30000`,
			"finish_bounded":       `'{1,2,3}', '{1,1,1}', '{completed,completed,retryable}', '{completed,completed,failed}', '{NULL,NULL,NULL}', '{"","",boom}', '{f,f,t}', 'w', 30000`,
		} {
			plan := explain(t, conn, "EXPLAIN EXECUTE "+name+"("+args+")")
			if scan := unboundedJobScan(plan); scan != "" {
				t.Errorf("%s, %s: %q has no index condition on id:\n%s", mode, name, scan, plan)
			}
			// The one-lease completion makes its bound's settings in a
			// one-time filter, before its scan reaches the row.
			if strings.HasPrefix(name, "complete_one_bounded") && !hasLine(plan, "One-Time Filter") {
				t.Errorf("%s, %s: no one-time filter:\n%s", mode, name, plan)
			}
		}
	}
}

// tidScanPerRow reports whether plan finds rows by address one at a time:
// a TID condition that is not a list (ctid = ANY) is a TID scan rescanned
// for every row, and each TID scan asks the kernel for the table's size.
func tidScanPerRow(plan string) bool {
	for _, l := range strings.Split(plan, "\n") {
		if strings.Contains(l, "TID Cond:") && !strings.Contains(l, "ANY") {
			return true
		}
	}
	return false
}

// hasLine reports whether a line of plan contains every one of parts.
func hasLine(plan string, parts ...string) bool {
	for _, l := range strings.Split(plan, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// unboundedJobScan returns the first scan of leasehold_job in plan without
// an index condition on id, or "".
func unboundedJobScan(plan string) string {
	lines := strings.Split(plan, "\n")
	for i, l := range lines {
		if !strings.Contains(l, "Scan") || !strings.Contains(l, " on leasehold_job ") {
			continue
		}
		bounded := false
		for _, detail := range lines[i+1:] {
			if strings.Contains(detail, "->") {
				break
			}
			if strings.Contains(detail, "Index Cond: ((id ") || strings.Contains(detail, "Index Cond: (id ") {
				bounded = true
			}
		}
		if !bounded {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// TestFlowIndexesUsable checks that the flow-control statements can use the
// partial indexes of migrations 3 and 4: with sequential scans disabled,
// each plan names the index whose predicate its WHERE clause must imply
// (and, for the running counts, tests queue or kind in the index scan). A
// statement whose predicate drifted from its index would fall back to
// another index or a (disabled) sequential scan.
func TestFlowIndexesUsable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	seedPlanJobs(t, d)
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatalf("disable sequential scans: %v", err)
	}
	for _, tc := range []struct {
		name, query string
		want        []string
	}{
		{"cancel requests", strings.ReplaceAll(jobCancelRequestedSQL, "$1", "'owner'"), []string{"leasehold_job_cancel_requested_idx"}},
		{"prune", strings.NewReplacer("$1", "'{completed}'", "$2", "1000", "$3", "10").Replace(jobPruneSQL), []string{"leasehold_job_finalized_idx"}},
		{"unique holders", strings.ReplaceAll(jobGetHoldersByKeysSQL, "$1", "'{a,b}'"), []string{"leasehold_job_unique_key_idx"}},
		{"running by queue", strings.NewReplacer("$1", "'q0'", "$2", "'{}'").Replace(jobCountRunningSQL),
			[]string{"leasehold_job_running_idx", "Index Cond: (queue = 'q0'::text)"}},
		{"running by kind", strings.NewReplacer("$1", "'q0'", "$2", "'{k1}'").Replace(jobCountRunningSQL),
			[]string{"leasehold_job_running_idx", "Index Cond: (kind = k.kind)"}},
		{"expire", strings.NewReplacer("$1", "100", "$2", "5", "$3", "''", "$4", "'{}'").Replace(jobExpireSQL), []string{"leasehold_job_running_idx"}},
		{"expire of a queue", strings.NewReplacer("$1", "100", "$2", "5", "$3", "'q0'", "$4", "'{k1}'").Replace(jobExpireSQL), []string{"leasehold_job_running_idx"}},
	} {
		plan := explain(t, conn, "EXPLAIN "+tc.query)
		for _, want := range tc.want {
			if !strings.Contains(plan, want) {
				t.Errorf("%s: plan does not use %s:\n%s", tc.name, want, plan)
			}
		}
	}
}

// TestCancelCheckPlanUnderStaleStats guards the cancellation check's plan
// where statistics mislead it most: taken while every job was available (a
// fresh backlog analyzed before any worker ran), then thousands of jobs
// claimed. The planner then takes the running jobs for none; keyed by lease
// owner, the check's index lost to the running index (whose id follows
// the table's order), and each check walked every running job. Keyed by
// id (migration 11), it wins under these statistics too, as a custom plan
// and as a generic one.
func TestCancelCheckPlanUnderStaleStats(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	analyzedThenClaimed(t, d, "q", 20000, 4000)
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatalf("set %s: %v", mode, err)
		}
		plan := explain(t, conn, "EXPLAIN "+strings.ReplaceAll(jobCancelRequestedSQL, "$1", "'w'"))
		if mode == "force_generic_plan" {
			if _, err := conn.Exec(ctx, "PREPARE cancel_check(text) AS "+jobCancelRequestedSQL); err != nil {
				t.Fatalf("prepare: %v", err)
			}
			plan = explain(t, conn, "EXPLAIN EXECUTE cancel_check('w')")
		}
		if !strings.Contains(plan, "leasehold_job_cancel_requested_idx") || strings.Contains(plan, "Sort") {
			t.Errorf("%s: the cancellation check does not read its index in order:\n%s", mode, plan)
		}
	}
}

// TestStateIndexesUsable checks the readers of migration 4's indexes: the
// count per queue and state reads one partial index per group of states
// (no branch scans the table), and listings by a state off the success
// path read the state index.
func TestStateIndexesUsable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	seedPlanJobs(t, d)
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET enable_seqscan = off"); err != nil {
		t.Fatalf("disable sequential scans: %v", err)
	}
	count := explain(t, conn, "EXPLAIN "+jobCountByStateSQL)
	// Any of the running indexes serves the running branch.
	for _, idx := range []string{"leasehold_job_claim_idx", "leasehold_job_running_", "leasehold_job_state_idx", "leasehold_job_finalized_idx"} {
		if !strings.Contains(count, idx) {
			t.Errorf("count by state does not use %s:\n%s", idx, count)
		}
	}
	if strings.Contains(count, "Seq Scan") {
		t.Errorf("count by state scans the table:\n%s", count)
	}
	for _, state := range []string{"scheduled", "retryable", "discarded", "cancelled", "stuck"} {
		plan := explain(t, conn, fmt.Sprintf("EXPLAIN %s WHERE state = ANY('{%s}'::text[]) AND queue = 'q1' ORDER BY id DESC LIMIT 100", jobListSelectSQL, state))
		if !strings.Contains(plan, "leasehold_job_state_idx") {
			t.Errorf("listing %s jobs does not use the state index:\n%s", state, plan)
		}
	}
}

// seedPlanJobs inserts enough jobs of several kinds and queues for the
// planner to prefer indexes, and refreshes the statistics.
func seedPlanJobs(t *testing.T, d *Driver) {
	t.Helper()
	params := make([]*driver.JobInsertParams, 5000)
	for i := range params {
		params[i] = testJob(fmt.Sprintf("q%d", i%4))
		params[i].Kind = fmt.Sprintf("k%d", i%5)
	}
	if _, err := d.GetExecutor().JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: params}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	exec := d.GetExecutor()
	for q := range 4 {
		jobs, err := exec.JobClaim(t.Context(), &driver.JobClaimParams{
			Queue: fmt.Sprintf("q%d", q), Max: 400, Owner: fmt.Sprintf("w%d", q), DefaultLeaseTTL: time.Hour})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		for _, j := range jobs[:20] {
			if _, _, err := exec.JobCancelRunning(t.Context(), &driver.JobCancelRunningParams{ID: j.ID}); err != nil {
				t.Fatalf("cancel: %v", err)
			}
		}
	}
	if _, err := d.Pool().Exec(t.Context(), "ANALYZE leasehold_job"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
}

// analyzedThenClaimed inserts n jobs into queue, takes the statistics
// while all of them are available, then has owner "w" claim the first
// claimed of them: the statistics of a backlog analyzed before any worker
// ran, which lead the planner to expect no running job.
func analyzedThenClaimed(t *testing.T, d *Driver, queue string, n, claimed int) {
	t.Helper()
	ctx := t.Context()
	exec := d.GetExecutor()
	insertJobs(t, exec, queue, n)
	if _, err := d.Pool().Exec(ctx, "ANALYZE leasehold_job"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	for claimed > 0 {
		jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: queue, Max: min(claimed, 1000), Owner: "w", DefaultLeaseTTL: time.Hour})
		if err != nil || len(jobs) == 0 {
			t.Fatalf("claim: %d jobs, %v", len(jobs), err)
		}
		claimed -= len(jobs)
	}
}

// explain runs an EXPLAIN statement and returns its plan as text.
func explain(t *testing.T, conn *pgxpool.Conn, sql string) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatalf("scan plan: %v", err)
		}
		lines = append(lines, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}
