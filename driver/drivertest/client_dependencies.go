package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// GraphNodes is the size of the job graph of Client/Dependencies on
// Postgres: a thousand nodes inserted by one call. The single-writer
// backends run graphNodesSmall, which exercises the same shapes.
const GraphNodes = 1000

// graphNodesSmall is the graph size on backends other than postgres.
const graphNodesSmall = 300

// nodeArgs is a node of a job graph.
type nodeArgs struct {
	Node    int   `json:"node"`
	Parents []int `json:"parents,omitempty"`
	// Fail makes the node fail permanently until the test lets it pass.
	Fail bool `json:"fail,omitempty"`
}

func (nodeArgs) Kind() string { return "drivertest_node" }

// graphWorker runs nodes, recording each run and any node that started
// before one of its parents had finished.
type graphWorker struct {
	mu         sync.Mutex
	done       map[int]bool
	runs       map[int]int
	violations []string
	failing    map[int]bool // nodes that fail (Permanent) while set
}

func newGraphWorker() *graphWorker {
	return &graphWorker{done: map[int]bool{}, runs: map[int]int{}, failing: map[int]bool{}}
}

func (w *graphWorker) Work(ctx context.Context, j *leasehold.Job[nodeArgs]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs[j.Args.Node]++
	for _, p := range j.Args.Parents {
		if !w.done[p] {
			w.violations = append(w.violations, fmt.Sprintf("node %d ran before its parent %d finished", j.Args.Node, p))
		}
	}
	if j.Args.Fail && w.failing[j.Args.Node] {
		return leasehold.Permanent(errors.New("node fails"))
	}
	w.done[j.Args.Node] = true
	return nil
}

func (w *graphWorker) setFailing(node int, fail bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing[node] = fail
}

func (w *graphWorker) snapshot() (runs map[int]int, violations []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	runs = make(map[int]int, len(w.runs))
	for k, v := range w.runs {
		runs[k] = v
	}
	return runs, append([]string(nil), w.violations...)
}

// testClientDependencies: a graph of jobs with fan-out and fan-in, spread
// over two queues served by two clients, inserted by one InsertMany call,
// runs every node exactly once and each only after all its parents
// completed. A dependency on an existing job, a parent already completed,
// a forward position and an unknown ID behave as documented.
func testClientDependencies[TTx any](t *testing.T, b Backend[TTx]) {
	runHeavy(t)
	env := newClientEnv(t, b)
	n := graphNodesSmall
	if env.d.Name() == "postgres" {
		n = GraphNodes
	}
	w := newGraphWorker()
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, w)
	queues := map[string]leasehold.QueueConfig{"graph_a": {MaxWorkers: 8}, "graph_b": {MaxWorkers: 8}}
	inserter := env.client(nil, leasehold.Config{})

	// An existing root, completed before the graph is inserted, and one
	// still waiting when it is.
	doneRoot := insert(t, inserter, nodeArgs{Node: -1}, &leasehold.InsertOpts{Queue: "graph_a"})
	liveRoot := insert(t, inserter, nodeArgs{Node: -2}, &leasehold.InsertOpts{Queue: "graph_b", ScheduledAt: time.Now().Add(400 * time.Millisecond)})

	rng := rand.New(rand.NewPCG(21, 1))
	params := make([]leasehold.InsertManyParams, n)
	parentsOf := make([][]int, n)
	for i := range params {
		var parents []int
		switch {
		case i == 0:
		case i%100 == 99: // fan-in: many parents
			for k := max(0, i-40); k < i; k += 2 {
				parents = append(parents, k)
			}
		default:
			for range rng.IntN(3) + 1 {
				parents = append(parents, rng.IntN(i))
			}
		}
		opts := &leasehold.InsertOpts{Queue: []string{"graph_a", "graph_b"}[i%2], DependsOnIndex: parents}
		args := nodeArgs{Node: i, Parents: parents}
		switch i {
		case 0:
			opts.DependsOn = []int64{doneRoot.ID, liveRoot.ID}
			args.Parents = []int{-1, -2}
		case 1:
			opts.DependsOn = []int64{doneRoot.ID}
		}
		parentsOf[i] = args.Parents
		params[i] = leasehold.InsertManyParams{Args: args, InsertOpts: opts}
	}
	// The completed root must be done before the graph goes in.
	env.client(nil, leasehold.Config{ID: "graph-a", Queues: map[string]leasehold.QueueConfig{"graph_a": queues["graph_a"]}, Workers: workers})
	env.waitState(doneRoot.ID, leasetype.JobStateCompleted, 10*time.Second)

	res, err := inserter.InsertMany(context.Background(), params)
	if err != nil {
		t.Fatalf("InsertMany of the graph: %v", err)
	}
	// Every node waits: node 0 on the scheduled root, the others on
	// earlier nodes (node 1 also on the completed root, which does not
	// count).
	for i, r := range res {
		if r.Job.State != leasetype.JobStatePending || r.Job.ID == 0 {
			t.Fatalf("node %d inserted %s, want pending", i, r.Job.State)
		}
	}
	deps, err := inserter.JobDependencies(context.Background(), res[0].Job.ID)
	if err != nil || len(deps) < 2 || deps[0].Child != res[0].Job.ID {
		t.Fatalf("JobDependencies(node 0) = %+v, %v; want its two roots first", deps, err)
	}

	env.client(nil, leasehold.Config{ID: "graph-b", Queues: map[string]leasehold.QueueConfig{"graph_b": queues["graph_b"]}, Workers: workers})
	last := res[n-1].Job.ID
	waitFor(t, 120*time.Second, func() bool {
		runs, _ := w.snapshot()
		return len(runs) >= n+2 && env.job(last).State == leasetype.JobStateCompleted
	}, func() string {
		runs, _ := w.snapshot()
		return fmt.Sprintf("%d of %d nodes ran", len(runs), n+2)
	})
	for i := range n {
		env.waitState(res[i].Job.ID, leasetype.JobStateCompleted, 30*time.Second)
	}
	runs, violations := w.snapshot()
	if len(violations) > 0 {
		t.Fatalf("%d ordering violations, first: %s", len(violations), violations[0])
	}
	for i := -2; i < n; i++ {
		if runs[i] != 1 {
			t.Fatalf("node %d ran %d times, want once", i, runs[i])
		}
	}

	// Bad dependencies are refused and insert nothing.
	_, err = inserter.InsertMany(context.Background(), []leasehold.InsertManyParams{
		{Args: nodeArgs{Node: 9001}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: []int{1}}},
		{Args: nodeArgs{Node: 9002}},
	})
	if !errors.Is(err, leasehold.ErrInvalidArgs) || !strings.Contains(err.Error(), "before it") {
		t.Errorf("forward dependency = %v, want ErrInvalidArgs explaining only earlier jobs", err)
	}
	_, err = inserter.Insert(context.Background(), nodeArgs{Node: 9003}, &leasehold.InsertOpts{DependsOn: []int64{last + 1_000_000}})
	if !errors.Is(err, leasehold.ErrNotFound) {
		t.Errorf("dependency on an unknown ID = %v, want ErrNotFound", err)
	}
}

// testClientDependencyFailure: a parent that is discarded cancels the
// dependents with the cancel policy, transitively and with the reason
// recorded, and leaves those with the wait policy pending. Retrying the
// parent puts the cancelled ones back to pending, and once it completes
// every dependent runs.
func testClientDependencyFailure[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := newGraphWorker()
	w.setFailing(0, true)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, w)
	c := env.client(nil, leasehold.Config{Workers: workers})
	res, err := c.InsertMany(context.Background(), []leasehold.InsertManyParams{
		{Args: nodeArgs{Node: 0, Fail: true}, InsertOpts: &leasehold.InsertOpts{MaxAttempts: 1}},
		{Args: nodeArgs{Node: 1, Parents: []int{0}}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: []int{0}}},
		{Args: nodeArgs{Node: 2, Parents: []int{1}}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: []int{1}}},
		{Args: nodeArgs{Node: 3, Parents: []int{0}}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: []int{0}, DependencyPolicy: leasehold.DependencyWait}},
	})
	if err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	id := func(i int) int64 { return res[i].Job.ID }
	env.waitState(id(0), leasetype.JobStateDiscarded, 10*time.Second)
	for _, i := range []int{1, 2} {
		row := env.waitState(id(i), leasetype.JobStateCancelled, 5*time.Second)
		if !strings.Contains(row.LastError, "dependency") || row.FinalizedAt == nil {
			t.Errorf("node %d cancelled with last error %q finalized %v, want the dependency named", i, row.LastError, row.FinalizedAt)
		}
	}
	if row := env.job(id(1)); !strings.Contains(row.LastError, fmt.Sprint(id(0))) {
		t.Errorf("node 1 last error %q does not name its parent %d", row.LastError, id(0))
	}
	if row := env.job(id(3)); row.State != leasetype.JobStatePending {
		t.Errorf("node 3 (wait policy) is %s after its parent was discarded, want pending", row.State)
	}
	// A job inserted now on the discarded parent applies its policy at once.
	late, err := c.Insert(context.Background(), nodeArgs{Node: 4}, &leasehold.InsertOpts{DependsOn: []int64{id(0)}})
	if err != nil || late.Job.State != leasetype.JobStateCancelled {
		t.Fatalf("insert depending on a discarded job = %v, %v; want it cancelled at once", late, err)
	}

	// The operator fixes the cause and retries the parent: every dependent
	// continues.
	w.setFailing(0, false)
	if _, err := c.JobRetry(context.Background(), id(0)); err != nil {
		t.Fatalf("JobRetry: %v", err)
	}
	for i := range 4 {
		env.waitState(id(i), leasetype.JobStateCompleted, 10*time.Second)
	}
	runs, violations := w.snapshot()
	if len(violations) > 0 {
		t.Fatalf("ordering violations: %v", violations)
	}
	if runs[0] != 2 || runs[1] != 1 || runs[2] != 1 || runs[3] != 1 {
		t.Errorf("runs = %v, want node 0 twice (failed, retried) and the others once", runs)
	}

	// Bulk actions apply the same rules: a parent discarded in bulk cancels
	// its dependent, and retried in bulk lets it continue.
	bulk, err := c.InsertMany(context.Background(), []leasehold.InsertManyParams{
		{Args: nodeArgs{Node: 5}, InsertOpts: &leasehold.InsertOpts{Queue: "bulkdeps", MaxAttempts: 1}},
		{Args: nodeArgs{Node: 6, Parents: []int{5}}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: []int{0}}},
	})
	if err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	parent, child := bulk[0].Job.ID, bulk[1].Job.ID
	bulkDo := func(action leasehold.BulkAction, states ...leasetype.JobState) {
		t.Helper()
		res, err := c.JobBulk(context.Background(), &leasehold.BulkParams{Action: action, Queue: "bulkdeps", States: states})
		if err != nil || res.Changed != 1 {
			t.Fatalf("bulk %s of queue bulkdeps = %+v, %v; want its one job changed", action, res, err)
		}
	}
	bulkDo(leasehold.BulkDiscard, leasetype.JobStateAvailable)
	if row := env.waitState(child, leasetype.JobStateCancelled, 5*time.Second); !strings.Contains(row.LastError, fmt.Sprint(parent)) {
		t.Errorf("dependent of a parent discarded in bulk: last error %q does not name the parent %d", row.LastError, parent)
	}
	bulkDo(leasehold.BulkRetry, leasetype.JobStateDiscarded)
	if row := env.job(child); row.State != leasetype.JobStatePending {
		t.Errorf("dependent of a parent retried in bulk is %s, want pending again", row.State)
	}
}
