package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// TestKeyedClaimPlan guards the keyed claim's plans, on a fresh file (no
// statistics) and after a backlog of 20,000 jobs over 10 keys, a few of
// them running, was analyzed: the claim walks and reads the key index,
// counts a key's running jobs on the key's entries of the flow key index
// (the state index would read every running job of the queue for each
// key), and never scans the job table, a bloom filter included (SQLite
// builds one by scanning the table, which made a claim read the whole
// backlog). The claim without key limits (sequences only) reads the claim
// index in claim order, and the lease finds its jobs by ID.
func TestKeyedClaimPlan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	keyed := func(max, keyLimit, kindKeyLimit, rate int, kinds string) []any {
		return []any{"q", max, kinds, "[]", "[]", time.Now().UnixMicro(),
			keyLimit, kindKeyLimit, "k", "queue", "q", time.Now().UnixMicro(), rate, true, "queue", "q"}
	}
	cases := []struct {
		name, query string
		args        []any
		want        []string
	}{
		{"queue key limit", jobClaimKeyedSQL, keyed(100, 1, 0, 0, "[]"),
			[]string{"USING INDEX leasehold_job_key_claim_idx", "USING INDEX leasehold_job_flow_key_idx"}},
		{"kind key limit", jobClaimKeyedSQL, keyed(100, 0, 2, 0, `["k"]`),
			[]string{"USING INDEX leasehold_job_key_claim_idx", "USING INDEX leasehold_job_flow_key_idx"}},
		{"key rate", jobClaimKeyedSQL, keyed(100, 0, 0, 3, "[]"),
			[]string{"USING INDEX leasehold_job_key_claim_idx", "sqlite_autoindex_leasehold_key_window_1"}},
		{"large claim", jobClaimKeyedSQL, keyed(2000, 1, 0, 0, "[]"),
			[]string{"USING INDEX leasehold_job_key_claim_idx"}},
		{"sequences only", jobClaimSequencedSQL, keyed(2000, 0, 0, 0, "[]")[:6],
			[]string{"USING INDEX leasehold_job_claim_idx"}},
		{"lease", jobClaimPickedSQL, []any{"o", "{}", 1000, "[]", time.Now().UnixMicro(), "[1, 2]"},
			[]string{"SEARCH leasehold_job USING INTEGER PRIMARY KEY"}},
	}
	check := func(when string) {
		for _, tc := range cases {
			plan := queryPlan(t, d, tc.query, tc.args...)
			for _, want := range tc.want {
				if !strings.Contains(plan, want) {
					t.Errorf("%s, %s: plan does not use %q:\n%s", when, tc.name, want, plan)
				}
			}
			for _, line := range strings.Split(plan, "\n") {
				line = strings.TrimSpace(line)
				for _, alias := range []string{"leasehold_job", "j", "n", "r", "p"} {
					if line == "SCAN "+alias || strings.HasPrefix(line, "SCAN "+alias+" ") {
						t.Errorf("%s, %s: plan scans the job table (%s):\n%s", when, tc.name, line, plan)
					}
				}
				if strings.HasPrefix(line, "BLOOM FILTER ON") || strings.Contains(line, "leasehold_job_state_queue_idx") {
					t.Errorf("%s, %s: plan reads the queue's jobs beyond the keys it walks (%s):\n%s", when, tc.name, line, plan)
				}
			}
		}
	}
	check("fresh file")

	var params []*driver.JobInsertParams
	for i := range 20000 {
		p := insertParams("q", 1)[0]
		p.Kind, p.Key = "k", fmt.Sprintf("k%02d", i%10)
		params = append(params, p)
	}
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: params}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if got, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 5, Owner: "o", DefaultLeaseTTL: time.Hour}); err != nil || len(got) != 5 {
		t.Fatalf("claim 5: %d jobs, %v", len(got), err)
	}
	if _, err := d.DB().ExecContext(ctx, "ANALYZE"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	check("analyzed backlog")
}

// queryPlan returns the EXPLAIN QUERY PLAN of query, a line per step,
// indented by depth.
func queryPlan(t *testing.T, d *Driver, query string, args ...any) string {
	t.Helper()
	rows, err := d.DB().QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain: %v", err)
	}
	defer rows.Close()
	depth := map[int]int{}
	var b strings.Builder
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		depth[id] = depth[parent] + 1
		fmt.Fprintf(&b, "%s%s\n", strings.Repeat("  ", depth[id]-1), detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
