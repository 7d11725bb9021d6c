package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// TestQueryPlans guards the plans the queue's throughput depends on: a batch
// walks its JSON array and finds each job by ID, a claim (with or without
// kind filters) uses the claim index, and the flow-control reads and prunes
// use their partial indexes.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	for _, tc := range []struct {
		name, query, want string
		args              []any
	}{
		{"heartbeat", jobHeartbeatSQL, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"[]", "o", 0}},
		{"finish", jobFinishSQL, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"[]", 0, "o"}},
		{"finish attempts", attemptInsertFinishedSQL, "SEARCH j USING INTEGER PRIMARY KEY", []any{"[]", 0}},
		{"finish plain", jobFinishPlainSQL, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"{}", 0, "o", "completed", 0}},
		{"finish plain attempts", attemptInsertPlainSQL, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"[]", 0, "completed", "completed"}},
		{"claimed jobs", jobsByIDSQL, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"[]"}},
		{"claim", jobClaimSQL, "USING INDEX leasehold_job_claim_idx", []any{"o", "{}", 1, "[]", "q", 1, 0}},
		{"unique key", jobGetKeyHolderSQL, "USING INDEX leasehold_job_unique_key_idx", []any{"k"}},
		{"claim kinds", jobClaimKindsSQL, "USING INDEX leasehold_job_claim_idx", []any{"o", "{}", 1, "[]", "q", 1, 0, `["a"]`, "[]"}},
		{"running by queue", jobCountRunningQueueSQL, "USING INDEX leasehold_job_state_queue_idx (state=? AND queue=?)", []any{"q"}},
		{"running by kind", jobCountRunningKindsSQL, "USING INDEX leasehold_job_running_kind_idx", []any{`["a"]`}},
		{"cancel requested", jobCancelRequestedSQL, "USING INDEX leasehold_job_cancel_idx", []any{"o"}},
		{"job prune", jobPruneSQL, "USING INDEX leasehold_job_finalized_idx", []any{`["completed"]`, 0, 1}},
		{"attempt prune", attemptPruneSQL, "USING COVERING INDEX leasehold_attempt_finished_idx", []any{0, 1}},
	} {
		rows, err := d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+tc.query, tc.args...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if got := strings.Join(plan, "; "); !strings.Contains(got, tc.want) {
			t.Errorf("%s plan = %q, want it to %s", tc.name, got, tc.want)
		}
	}
}

// TestClaimPlansAfterAnalyze guards the claim's plans under statistics
// taken on a backlog (ANALYZE or PRAGMA optimize after a bulk insert: one
// queue, one state, thousands of rows), with finished jobs kept in the
// table: the claims and their existence checks read the claim index's
// range of the queue in claim order, merging its two groups. Such
// statistics once made the planner scan the table for the existence check
// (through every finished job) and skip-scan the claim index on
// scheduled_at and sort it (reading the whole backlog) for the claim. The
// maintenance statements and the batch writes never scan the table.
func TestClaimPlansAfterAnalyze(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: insertParams("q", 3000)}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1000, Owner: "o", DefaultLeaseTTL: time.Hour})
	if err != nil || len(jobs) != 1000 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	items := make([]*driver.JobFinish, len(jobs))
	for i, j := range jobs {
		items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: "completed", Outcome: "completed"}
	}
	if _, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "o", Items: items}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	if _, err := d.DB().ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	now := time.Now().UnixMicro()
	for _, tc := range []struct {
		name, query string
		args        []any
		merge       bool
	}{
		{"claim", jobClaimSQL, []any{"o", "{}", 1, "[]", "q", 100, now}, true},
		{"claim kinds", jobClaimKindsSQL, []any{"o", "{}", 1, "[]", "q", 100, now, `["email"]`, "[]"}, true},
		{"claim sequenced", jobClaimSequencedSQL, []any{"q", 100, "[]", "[]", "[]", now}, true},
		{"claimable", jobClaimableExistsSQL, []any{"q"}, false},
		{"claimable kinds", jobClaimableKindsExistsSQL, []any{"q", `["email"]`, "[]"}, false},
	} {
		plan := queryPlan(t, d, tc.query, tc.args...)
		if !strings.Contains(plan, "USING INDEX leasehold_job_claim_idx (queue=?") {
			t.Errorf("%s: plan does not read the queue's range of the claim index:\n%s", tc.name, plan)
		}
		if tc.merge && !strings.Contains(plan, "MERGE (UNION ALL)") {
			t.Errorf("%s: plan does not merge the claim index's groups:\n%s", tc.name, plan)
		}
		for _, bad := range []string{"SCAN leasehold_job\n", "SCAN j\n", "TEMP B-TREE", "ANY("} {
			if strings.Contains(plan, bad) {
				t.Errorf("%s: plan has %q:\n%s", tc.name, strings.TrimSpace(bad), plan)
			}
		}
	}
	for _, tc := range []struct {
		name, query string
		args        []any
	}{
		{"expire", jobExpireSQL, []any{10, 5, now, "", "[]"}},
		{"expire of a queue and kinds", jobExpireSQL, []any{10, 5, now, "q", `["email"]`}},
		{"expired", jobExpiredExistsSQL, nil},
		{"running by queue", jobCountRunningQueueSQL, []any{"q"}},
		{"running by kind", jobCountRunningKindsSQL, []any{`["email"]`}},
		{"cancel requested", jobCancelRequestedSQL, []any{"o"}},
		{"backlog", queueBacklogSQL, nil},
		{"by state", jobCountByStateSQL, nil},
		{"heartbeat", jobHeartbeatSQL, []any{"[]", "o", now}},
		{"finish", jobFinishSQL, []any{"[]", now, "o"}},
	} {
		if plan := queryPlan(t, d, tc.query, tc.args...); strings.Contains(plan, "SCAN leasehold_job\n") {
			t.Errorf("%s: plan scans the job table:\n%s", tc.name, plan)
		}
	}
}
