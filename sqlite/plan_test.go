package sqlite

import (
	"context"
	"strings"
	"testing"
)

// TestQueryPlans guards the plans the queue's throughput depends on: a batch
// walks its JSON array and finds each job by ID, a claim uses the claim index.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	for _, tc := range []struct {
		name, query, want string
		args              []any
	}{
		{"heartbeat", queryJobHeartbeat, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"[]"}},
		{"finish", queryJobFinish, "SEARCH leasehold_job USING INTEGER PRIMARY KEY", []any{"[]", 0}},
		{"finish attempts", queryAttemptInsertFinished, "SEARCH j USING INTEGER PRIMARY KEY", []any{"[]", 0}},
		{"claim", queryJobClaim, "USING INDEX leasehold_job_claim_idx", []any{"o", "{}", 1, "[]", "q", 1}},
		{"unique key", queryJobGetUnfinishedByKey, "USING INDEX leasehold_job_unique_key_idx", []any{"k"}},
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
