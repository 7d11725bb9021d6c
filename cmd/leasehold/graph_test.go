package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
)

// graphArgs is a step of the CLI tests' graphs.
type graphArgs struct{}

func (graphArgs) Kind() string { return "graph_step" }

// insertTestGraph inserts authorize → capture, authorize → refund-check,
// capture → ledger through a client on the backend's database and returns
// the IDs by step name.
func (b *backend) insertTestGraph(t *testing.T) map[string]int64 {
	t.Helper()
	if b.db.SQLite != nil {
		return insertTestGraph(t, b.db.SQLite)
	}
	return insertTestGraph(t, b.db.Postgres)
}

func insertTestGraph[TTx any](t *testing.T, d driver.Driver[TTx]) map[string]int64 {
	t.Helper()
	c, err := leasehold.NewClient(d, nil)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	g := leasehold.NewGraph()
	a := g.Add("authorize", graphArgs{}, nil)
	capture := g.Add("capture", graphArgs{}, nil, a)
	g.Add("refund-check", graphArgs{}, nil, a)
	g.Add("ledger", graphArgs{}, nil, capture)
	res, err := c.InsertGraph(context.Background(), g)
	if err != nil {
		t.Fatalf("InsertGraph: %v", err)
	}
	return res.IDs
}

func TestJobsGraph(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		ids := b.insertTestGraph(t)
		capture := fmt.Sprint(ids["capture"])

		out := b.ok(t, "jobs", "graph", capture)
		wantAll(t, "jobs graph", out, fmt.Sprintf("Job %s: 1 upstream, 1 downstream", capture),
			"LEVEL", "STEP", "STATE", "PARENTS", "authorize", "capture", "ledger", "available", "pending")
		if strings.Contains(out, "refund-check") {
			t.Errorf("jobs graph of capture shows its sibling refund-check:\n%s", out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[2], "-1") || !strings.HasPrefix(lines[3], "0") || !strings.HasPrefix(lines[4], "+1") {
			t.Errorf("jobs graph lines, want header, table head, then levels -1, 0, +1:\n%s", out)
		}

		var got struct {
			ID    int64 `json:"id"`
			Nodes []struct {
				Job     *jobJSON `json:"job"`
				Step    string   `json:"step"`
				GraphID int64    `json:"graph_id"`
				Depth   int      `json:"depth"`
				Parents []int64  `json:"parents"`
			} `json:"nodes"`
			Edges     []leasehold.GraphEdge `json:"edges"`
			Truncated bool                  `json:"truncated"`
		}
		if err := json.Unmarshal([]byte(b.ok(t, "jobs", "graph", capture, "--json")), &got); err != nil {
			t.Fatalf("jobs graph --json: %v", err)
		}
		if len(got.Nodes) != 3 || len(got.Edges) != 2 || got.Truncated || got.ID != ids["capture"] {
			t.Fatalf("jobs graph --json = %+v, want 3 nodes and 2 edges about %d", got, ids["capture"])
		}
		for i, want := range []struct {
			step  string
			depth int
		}{{"authorize", -1}, {"capture", 0}, {"ledger", 1}} {
			n := got.Nodes[i]
			if n.Step != want.step || n.Depth != want.depth || n.GraphID != ids["authorize"] || n.Job.ID != ids[want.step] {
				t.Errorf("node %d = %s depth %d graph %d, want %s depth %d graph %d", i, n.Step, n.Depth, n.GraphID, want.step, want.depth, ids["authorize"])
			}
		}
		if p := got.Nodes[2].Parents; len(p) != 1 || p[0] != ids["capture"] {
			t.Errorf("ledger's parents = %v, want [%d]", p, ids["capture"])
		}

		// The first step sees both branches downstream; --limit truncates.
		out = b.ok(t, "jobs", "graph", fmt.Sprint(ids["authorize"]), "--limit", "2")
		wantAll(t, "jobs graph --limit 2", out, "0 upstream, 1 downstream", "truncated at 2 jobs")
		out = b.ok(t, "jobs", "graph", fmt.Sprint(ids["authorize"]))
		wantAll(t, "jobs graph of the first step", out, "0 upstream, 3 downstream", "refund-check", "ledger")

		b.fails(t, "job 999999 not found", "jobs", "graph", "999999")
		b.fails(t, `job ID "x" is not a positive integer`, "jobs", "graph", "x")
		b.fails(t, "--limit 0 is outside 1 to 10000", "jobs", "graph", capture, "--limit", "0")
	})
}

func TestJobsGraphCancel(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		ids := b.insertTestGraph(t)
		out := b.ok(t, "jobs", "graph-cancel", fmt.Sprint(ids["ledger"]))
		wantAll(t, "jobs graph-cancel", out, fmt.Sprintf("Graph of job %d: 4 steps cancelled, 0 running steps asked to cancel", ids["ledger"]))
		out = b.ok(t, "jobs", "graph", fmt.Sprint(ids["authorize"]))
		if n := strings.Count(out, "cancelled"); n != 4 {
			t.Errorf("jobs graph after graph-cancel shows %d cancelled steps, want 4:\n%s", n, out)
		}
		var got struct {
			Cancelled []int64 `json:"cancelled"`
			Requested []int64 `json:"requested"`
		}
		if err := json.Unmarshal([]byte(b.ok(t, "jobs", "graph-cancel", fmt.Sprint(ids["authorize"]), "--json")), &got); err != nil {
			t.Fatalf("jobs graph-cancel --json: %v", err)
		}
		if got.Cancelled == nil || len(got.Cancelled) != 0 || len(got.Requested) != 0 {
			t.Errorf("graph-cancel of a cancelled graph = %+v, want empty lists", got)
		}
		b.fails(t, "job 999999 not found", "jobs", "graph-cancel", "999999")
		var plain int64
		if _, err := fmt.Sscanf(b.ok(t, "enqueue", "--kind", "email", "--args", "{}"), "inserted job %d", &plain); err != nil {
			t.Fatalf("enqueue output: %v", err)
		}
		b.fails(t, fmt.Sprintf("job %d is not a step of a graph", plain), "jobs", "graph-cancel", fmt.Sprint(plain))
	})
}
