package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// graphHoldArgs is a graph step that runs until its context is cancelled.
type graphHoldArgs struct{}

func (graphHoldArgs) Kind() string { return "drivertest_graph_hold" }

// testClientGraph: a fan-out/fan-in graph inserted by one InsertGraph call
// (split → parts → join → report, and an audit step on split and join)
// runs every step once, each after all its parents; Graph lists its nodes
// and edges; bad graphs are refused and insert nothing; GraphCancel
// cancels the unfinished steps of another graph, with the reason
// recorded, and leaves the finished ones.
func testClientGraph[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	w := newGraphWorker()
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, w)
	leasehold.AddWorker(workers, leasehold.WorkFunc[graphHoldArgs](func(ctx context.Context, _ *leasehold.Job[graphHoldArgs]) error {
		<-ctx.Done()
		return context.Cause(ctx)
	}))
	inserter := env.client(nil, leasehold.Config{})

	const parts = 20
	g := leasehold.NewGraph()
	node := 0
	step := func(name string, parents ...leasehold.GraphStep) leasehold.GraphStep {
		// Parents in nodeArgs are node numbers: steps are numbered in
		// the order added.
		var ps []int
		for _, p := range parents {
			ps = append(ps, stepNumber(p))
		}
		node++
		return g.Add(name, nodeArgs{Node: node - 1, Parents: ps}, &leasehold.InsertOpts{Queue: []string{"graph_a", "graph_b"}[node%2]}, parents...)
	}
	split := step("s0-split")
	var fan []leasehold.GraphStep
	for i := range parts {
		fan = append(fan, step(fmt.Sprintf("s%d-part", i+1), split))
	}
	join := step(fmt.Sprintf("s%d-join", parts+1), fan...)
	step(fmt.Sprintf("s%d-report", parts+2), join)
	step(fmt.Sprintf("s%d-audit", parts+3), split, join)
	total := g.Len()

	res, err := inserter.InsertGraph(ctx, g)
	if err != nil {
		t.Fatalf("InsertGraph: %v", err)
	}
	if len(res.IDs) != total || res.GraphID != res.IDs["s0-split"] {
		t.Fatalf("InsertGraph returned %d IDs, graph %d; want %d and the first step's ID %d", len(res.IDs), res.GraphID, total, res.IDs["s0-split"])
	}
	for name, row := range res.Jobs {
		want := leasetype.JobStatePending
		if name == "s0-split" {
			want = leasetype.JobStateAvailable
		}
		if row.State != want {
			t.Fatalf("step %s inserted %s, want %s", name, row.State, want)
		}
		if gid, s, ok := leasehold.GraphNodeOf(env.job(row.ID)); !ok || gid != res.GraphID || s != name {
			t.Fatalf("step %s records graph %d step %q (%v), want graph %d", name, gid, s, ok, res.GraphID)
		}
	}
	view, err := inserter.Graph(ctx, res.IDs["s1-part"], 0)
	if err != nil {
		t.Fatalf("Graph: %v", err)
	}
	if wantEdges := parts*2 + 3; len(view.Nodes) != total || len(view.Edges) != wantEdges || view.ID != res.GraphID || view.Truncated {
		t.Fatalf("Graph = %d nodes, %d edges, id %d (truncated %v); want %d, %d, %d", len(view.Nodes), len(view.Edges), view.ID, view.Truncated, total, wantEdges, res.GraphID)
	}
	if small, err := inserter.Graph(ctx, res.GraphID, 5); err != nil || len(small.Nodes) != 5 || !small.Truncated {
		t.Fatalf("Graph limited to 5 = %v nodes, %v", small, err)
	}

	queues := map[string]leasehold.QueueConfig{"graph_a": {MaxWorkers: 4}, "graph_b": {MaxWorkers: 4}}
	env.client(nil, leasehold.Config{ID: "graph-1", Queues: queues, Workers: workers})
	env.client(nil, leasehold.Config{ID: "graph-2", Queues: queues, Workers: workers})
	for name, id := range res.IDs {
		if row := env.waitState(id, leasetype.JobStateCompleted, 60*time.Second); row.Attempt != 1 {
			t.Fatalf("step %s completed on attempt %d, want 1", name, row.Attempt)
		}
	}
	runs, violations := w.snapshot()
	if len(violations) > 0 {
		t.Fatalf("%d ordering violations, first: %s", len(violations), violations[0])
	}
	for i := range total {
		if runs[i] != 1 {
			t.Fatalf("step %d ran %d times, want once", i, runs[i])
		}
	}

	// Bad graphs.
	for name, bad := range map[string]func() *leasehold.Graph{
		"empty": leasehold.NewGraph,
		"duplicate": func() *leasehold.Graph {
			g := leasehold.NewGraph()
			a := g.Add("a", nodeArgs{Node: 9000}, nil)
			g.Add("a", nodeArgs{Node: 9001}, nil, a)
			return g
		},
		"unknown parent": func() *leasehold.Graph {
			g := leasehold.NewGraph()
			g.Add("a", nodeArgs{Node: 9000}, nil)
			g.Add("b", nodeArgs{Node: 9001}, nil, "nope")
			return g
		},
		"disconnected": func() *leasehold.Graph {
			g := leasehold.NewGraph()
			g.Add("a", nodeArgs{Node: 9000}, nil)
			g.Add("b", nodeArgs{Node: 9001}, nil)
			return g
		},
	} {
		if _, err := inserter.InsertGraph(ctx, bad()); !errors.Is(err, leasehold.ErrInvalidArgs) {
			t.Errorf("InsertGraph of a %s graph = %v, want ErrInvalidArgs", name, err)
		}
	}
	// An unknown external dependency rolls the whole graph back.
	g = leasehold.NewGraph()
	a := g.Add("a", nodeArgs{Node: 9000}, &leasehold.InsertOpts{Queue: "graph_idle"})
	g.Add("b", nodeArgs{Node: 9001}, &leasehold.InsertOpts{Queue: "graph_idle", DependsOn: []int64{res.GraphID + 1_000_000}}, a)
	if _, err := inserter.InsertGraph(ctx, g); !errors.Is(err, leasehold.ErrNotFound) {
		t.Errorf("InsertGraph with an unknown dependency = %v, want ErrNotFound", err)
	}
	if rows, err := inserter.JobList(ctx, &leasehold.JobListParams{Queue: "graph_idle"}); err != nil || len(rows) != 0 {
		t.Errorf("a refused graph left %d jobs (%v), want none", len(rows), err)
	}
	if _, err := inserter.Graph(ctx, res.GraphID+1_000_000, 0); !errors.Is(err, leasehold.ErrNotFound) {
		t.Errorf("Graph of an unknown ID = %v, want ErrNotFound", err)
	}

	// GraphCancel: a first step that completes, one that runs until
	// cancelled, and steps waiting on it.
	g = leasehold.NewGraph()
	first := g.Add("first", nodeArgs{Node: 100}, &leasehold.InsertOpts{Queue: "graph_a"})
	hold := g.Add("hold", graphHoldArgs{}, &leasehold.InsertOpts{Queue: "graph_a", MaxAttempts: 1}, first)
	after := g.Add("after", nodeArgs{Node: 102, Parents: []int{100}}, &leasehold.InsertOpts{Queue: "graph_a"}, hold)
	g.Add("last", nodeArgs{Node: 103, Parents: []int{102}}, &leasehold.InsertOpts{Queue: "graph_a", DependencyPolicy: leasehold.DependencyWait}, after, first)
	res2, err := inserter.InsertGraph(ctx, g)
	if err != nil {
		t.Fatalf("InsertGraph (to cancel): %v", err)
	}
	env.waitState(res2.IDs["first"], leasetype.JobStateCompleted, 30*time.Second)
	env.waitState(res2.IDs["hold"], leasetype.JobStateRunning, 30*time.Second)
	cres, err := inserter.GraphCancel(ctx, res2.IDs["last"])
	if err != nil {
		t.Fatalf("GraphCancel: %v", err)
	}
	if len(cres.Cancelled) != 2 || len(cres.Requested) != 1 || cres.Requested[0] != res2.IDs["hold"] {
		t.Fatalf("GraphCancel = %+v, want 2 cancelled and the running step %d asked to cancel", cres, res2.IDs["hold"])
	}
	env.waitState(res2.IDs["hold"], leasetype.JobStateCancelled, 30*time.Second)
	for _, name := range []string{"after", "last"} {
		row := env.job(res2.IDs[name])
		if row.State != leasetype.JobStateCancelled || !strings.Contains(row.LastError, fmt.Sprintf("graph %d", res2.GraphID)) {
			t.Errorf("step %s after GraphCancel: %s, last error %q; want cancelled naming graph %d", name, row.State, row.LastError, res2.GraphID)
		}
	}
	if row := env.job(res2.IDs["first"]); row.State != leasetype.JobStateCompleted {
		t.Errorf("the finished first step is %s after GraphCancel, want completed", row.State)
	}
	if runs, _ := w.snapshot(); runs[102] != 0 || runs[103] != 0 {
		t.Errorf("cancelled steps ran: %d, %d times", runs[102], runs[103])
	}
}

// stepNumber reads the node number from a step name "s<N>-...".
func stepNumber(s leasehold.GraphStep) int {
	var n int
	fmt.Sscanf(string(s), "s%d-", &n)
	return n
}
