package sqlite

import (
	"context"
	"strings"
	"testing"
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
