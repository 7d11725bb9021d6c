package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// GraphStep names a step of a Graph; Graph.Add returns it, to be passed as
// a parent of later steps.
type GraphStep string

// Graph is a set of named steps and the dependencies between them, built
// with NewGraph and Add and inserted as a whole by Client.InsertGraph. A
// step may depend only on steps added before it, so a graph has no
// cycles; it must be connected (every step reaches every other along its
// edges, either way): unrelated work is two graphs. A Graph is not safe
// for concurrent use.
type Graph struct {
	steps []graphStep
	index map[GraphStep]int
	err   error
}

type graphStep struct {
	name    GraphStep
	args    JobArgs
	opts    InsertOpts
	parents []int
}

// MaxGraphSteps is the most steps one graph may have.
const MaxGraphSteps = 10000

// MaxGraphStepName is the longest step name, in bytes.
const MaxGraphStepName = 128

// NewGraph returns an empty graph.
func NewGraph() *Graph {
	return &Graph{index: map[GraphStep]int{}}
}

// Add adds a step named name that runs args with opts (nil for the
// defaults) once every parent completed, and returns the step's name for
// later steps to depend on. The step's dependency policy and any DependsOn
// of opts (jobs outside the graph) apply as in InsertOpts. A bad step (an
// empty, long or duplicate name, an unknown parent, DependsOnIndex, a
// unique key) makes InsertGraph fail with the first such error.
func (g *Graph) Add(name string, args JobArgs, opts *InsertOpts, parents ...GraphStep) GraphStep {
	step := GraphStep(name)
	if g.err != nil {
		return step
	}
	if g.index == nil {
		g.index = map[GraphStep]int{}
	}
	fail := func(format string, a ...any) GraphStep {
		g.err = fmt.Errorf("%w: graph step %q: %s", ErrInvalidArgs, name, fmt.Sprintf(format, a...))
		return step
	}
	switch {
	case name == "":
		g.err = fmt.Errorf("%w: graph step %d has no name", ErrInvalidArgs, len(g.steps))
		return step
	case len(name) > MaxGraphStepName:
		return fail("the name is longer than %d bytes", MaxGraphStepName)
	case args == nil:
		return fail("no args")
	case len(g.steps) >= MaxGraphSteps:
		return fail("a graph has at most %d steps", MaxGraphSteps)
	}
	if _, dup := g.index[step]; dup {
		return fail("the name is used by another step")
	}
	s := graphStep{name: step, args: args}
	if opts != nil {
		s.opts = *opts
	}
	if len(s.opts.DependsOnIndex) > 0 {
		return fail("DependsOnIndex is not for graph steps: name the parents")
	}
	if s.opts.UniqueKey != "" || !s.opts.UniqueOpts.isZero() {
		return fail("graph steps may not be unique (a skipped step would break the graph)")
	}
	for _, p := range parents {
		i, ok := g.index[p]
		if !ok {
			return fail("unknown parent %q (add a step before the steps that depend on it)", p)
		}
		s.parents = append(s.parents, i)
	}
	slices.Sort(s.parents)
	s.parents = slices.Compact(s.parents)
	g.index[step] = len(g.steps)
	g.steps = append(g.steps, s)
	return step
}

// Len returns the number of steps added.
func (g *Graph) Len() int { return len(g.steps) }

// check reports why g cannot be inserted.
func (g *Graph) check() error {
	if g == nil || len(g.steps) == 0 && g.err == nil {
		return fmt.Errorf("%w: the graph has no steps", ErrInvalidArgs)
	}
	if g.err != nil {
		return g.err
	}
	// Connected: union the steps along their edges.
	root := make([]int, len(g.steps))
	for i := range root {
		root[i] = i
	}
	find := func(i int) int {
		for root[i] != i {
			root[i] = root[root[i]]
			i = root[i]
		}
		return i
	}
	for i, s := range g.steps {
		for _, p := range s.parents {
			root[find(i)] = find(p)
		}
	}
	for i := range g.steps {
		if find(i) != find(0) {
			return fmt.Errorf("%w: the graph is not connected: step %q has no path to step %q (insert unrelated work as another graph)", ErrInvalidArgs, g.steps[i].name, g.steps[0].name)
		}
	}
	return nil
}

// graphMetadataKey holds a graph node's graph and step in its metadata.
const graphMetadataKey = "leasehold_graph"

// graphMeta is the value under graphMetadataKey. The graph's first step
// (its ID is the graph's) has ID 0: it was inserted before the ID existed.
type graphMeta struct {
	ID   int64     `json:"id,omitempty"`
	Step GraphStep `json:"step"`
}

// GraphNodeOf returns the graph ID and the step name of job row, and
// false when the job is not a step of a graph.
func GraphNodeOf(row *leasetype.JobRow) (graphID int64, step string, ok bool) {
	if row == nil || len(row.Metadata) == 0 {
		return 0, "", false
	}
	var meta struct {
		Graph *graphMeta `json:"leasehold_graph"`
	}
	if err := json.Unmarshal(row.Metadata, &meta); err != nil || meta.Graph == nil || meta.Graph.Step == "" {
		return 0, "", false
	}
	if meta.Graph.ID == 0 {
		return row.ID, string(meta.Graph.Step), true
	}
	return meta.Graph.ID, string(meta.Graph.Step), true
}

// GraphResult is the outcome of InsertGraph.
type GraphResult struct {
	// GraphID identifies the graph: it is the ID of its first step.
	GraphID int64
	// IDs are the steps' job IDs by step name.
	IDs map[string]int64
	// Jobs are the inserted jobs by step name.
	Jobs map[string]*leasetype.JobRow
}

// InsertGraph inserts every step of g in one transaction: a step with
// parents waits in state pending until they completed (see the package
// documentation, Dependencies), a step without parents is available at
// once. Each job records its graph ID and step name in its metadata
// (GraphNodeOf reads them back). Insert middleware runs twice, for the
// first step and for the others: the first step's ID is the graph's and
// the others record it.
func (c *Client[TTx]) InsertGraph(ctx context.Context, g *Graph) (*GraphResult, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	var res *GraphResult
	err := inTx(ctx, c.core.exec, func(x driver.Executor) (err error) {
		res, err = c.core.insertGraph(ctx, x, g)
		return err
	})
	if err != nil {
		return nil, err
	}
	first := map[string]driver.ClaimPosition{}
	for _, j := range res.Jobs {
		if j.State == leasetype.JobStateAvailable {
			keepFirst(first, j.Queue, driver.PositionOf(j))
		}
	}
	c.core.wakeForInserts(first)
	return res, nil
}

// InsertGraphTx is InsertGraph inside the caller's transaction tx.
func (c *Client[TTx]) InsertGraphTx(ctx context.Context, tx TTx, g *Graph) (*GraphResult, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	var res *GraphResult
	err := inTx(ctx, c.driver.UnwrapExecutor(tx), func(x driver.Executor) (err error) {
		res, err = c.core.insertGraph(ctx, x, g)
		return err
	})
	return res, err
}

// insertGraph inserts g's first step, then the others with its ID, on x.
func (c *clientCore) insertGraph(ctx context.Context, x driver.Executor, g *Graph) (*GraphResult, error) {
	params := make([]InsertManyParams, len(g.steps))
	for i, s := range g.steps {
		opts := s.opts
		meta := make(map[string]any, len(opts.Metadata)+1)
		for k, v := range opts.Metadata {
			meta[k] = v
		}
		meta[graphMetadataKey] = graphMeta{Step: s.name}
		opts.Metadata = meta
		params[i] = InsertManyParams{Args: s.args, InsertOpts: &opts}
	}
	head, err := c.insertMany(ctx, x, params[:1], false)
	if err != nil {
		return nil, err
	}
	if head[0].UniqueSkipped {
		return nil, fmt.Errorf("%w: graph step %q was skipped as a duplicate (its args' options make it unique)", ErrInvalidArgs, g.steps[0].name)
	}
	graphID := head[0].Job.ID
	rows := []*InsertResult{head[0]}
	if len(params) > 1 {
		rest := params[1:]
		for k := range rest {
			i := k + 1
			opts := rest[k].InsertOpts
			opts.Metadata[graphMetadataKey] = graphMeta{ID: graphID, Step: g.steps[i].name}
			deps := append([]int64(nil), opts.DependsOn...)
			for _, p := range g.steps[i].parents {
				if p == 0 {
					deps = append(deps, graphID)
				} else {
					opts.DependsOnIndex = append(opts.DependsOnIndex, p-1)
				}
			}
			opts.DependsOn = deps
		}
		more, err := c.insertMany(ctx, x, rest, false)
		if err != nil {
			return nil, err
		}
		rows = append(rows, more...)
	}
	out := &GraphResult{GraphID: graphID, IDs: make(map[string]int64, len(rows)), Jobs: make(map[string]*leasetype.JobRow, len(rows))}
	for i, r := range rows {
		if r.UniqueSkipped {
			return nil, fmt.Errorf("%w: graph step %q was skipped as a duplicate (its args' options make it unique)", ErrInvalidArgs, g.steps[i].name)
		}
		out.IDs[string(g.steps[i].name)] = r.Job.ID
		out.Jobs[string(g.steps[i].name)] = r.Job
	}
	return out, nil
}

// GraphNode is one job of a GraphView.
type GraphNode struct {
	// Job is the job as read.
	Job *leasetype.JobRow `json:"job"`
	// GraphID and Step are the job's graph and step name; zero and empty
	// for a job not inserted by InsertGraph.
	GraphID int64  `json:"graph_id,omitempty"`
	Step    string `json:"step,omitempty"`
	// Depth is the node's distance from the job asked about: negative
	// upstream (its dependencies), positive downstream, 0 for the job
	// itself. In a whole graph it is the longest path from a first step.
	Depth int `json:"depth"`
}

// GraphEdge is a dependency between two nodes of a GraphView.
type GraphEdge struct {
	// Parent is the job waited for; Child waits.
	Parent int64 `json:"parent"`
	Child  int64 `json:"child"`
}

// GraphView is a part of the dependency graph: a job's ancestors and
// descendants (JobLineage) or the steps of one graph (Graph).
type GraphView struct {
	// ID is the job or graph asked about.
	ID int64 `json:"id"`
	// Nodes are the jobs, in ascending ID order (a parent before its
	// children).
	Nodes []*GraphNode `json:"nodes"`
	// Edges are the dependencies between Nodes.
	Edges []GraphEdge `json:"edges"`
	// Truncated is set when more jobs than the limit were reachable.
	Truncated bool `json:"truncated,omitempty"`
}

// DefaultGraphLimit is the most nodes JobLineage and Graph read when the
// limit given is not positive.
const DefaultGraphLimit = 1000

// JobLineage returns job id with its ancestors (the jobs it waits for,
// and theirs) and its descendants (the jobs waiting on it, and on them),
// at most limit jobs (DefaultGraphLimit when limit <= 0). It reads the
// dependency edges job by job: an operator's view, not a hot path.
func (c *Client[TTx]) JobLineage(ctx context.Context, id int64, limit int) (*GraphView, error) {
	return c.walkGraph(ctx, id, limit, false)
}

// Graph returns the steps of graph graphID (the ID of its first step, or
// of any step of it) and their edges, at most limit jobs
// (DefaultGraphLimit when limit <= 0). A job that is not a step of a graph
// is an error wrapping ErrNotFound.
func (c *Client[TTx]) Graph(ctx context.Context, graphID int64, limit int) (*GraphView, error) {
	return c.walkGraph(ctx, graphID, limit, true)
}

// walkGraph reads the nodes reachable from id: along edges either way
// among the steps of id's graph (whole), or up its parents and down its
// children (a lineage).
func (c *Client[TTx]) walkGraph(ctx context.Context, id int64, limit int, whole bool) (*GraphView, error) {
	if limit <= 0 {
		limit = DefaultGraphLimit
	}
	start, err := c.JobGet(ctx, id)
	if err != nil {
		return nil, err
	}
	graphID, _, isNode := GraphNodeOf(start)
	if whole {
		if !isNode {
			return nil, fmt.Errorf("%w: job %d is not a step of a graph", ErrNotFound, id)
		}
		if graphID != id {
			if start, err = c.JobGet(ctx, graphID); err != nil {
				return nil, fmt.Errorf("graph %d: first step: %w", graphID, err)
			}
		}
	}
	view := &GraphView{ID: id}
	if whole {
		view.ID = graphID
	}
	type item struct {
		row *leasetype.JobRow
		dir int // -1 up, +1 down, 0 both
	}
	seen := map[int64]*GraphNode{}
	edges := map[GraphEdge]bool{}
	add := func(row *leasetype.JobRow, depth int) *GraphNode {
		n := &GraphNode{Job: row, Depth: depth}
		if gid, step, ok := GraphNodeOf(row); ok {
			n.GraphID, n.Step = gid, step
		}
		seen[row.ID] = n
		return n
	}
	add(start, 0)
	queue := []item{{start, 0}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		deps, err := c.JobDependencies(ctx, it.row.ID)
		if err != nil {
			return nil, err
		}
		for _, e := range deps {
			up := e.Child == it.row.ID
			other := e.Child
			if up {
				other = e.Parent
			}
			if !whole && (up && it.dir > 0 || !up && it.dir < 0) {
				continue
			}
			if _, ok := seen[other]; !ok {
				if len(seen) >= limit {
					view.Truncated = true
					continue
				}
				row, err := c.JobGet(ctx, other)
				if errors.Is(err, ErrNotFound) {
					continue // deleted meanwhile
				}
				if err != nil {
					return nil, err
				}
				if gid, _, ok := GraphNodeOf(row); whole && (!ok || gid != graphID) {
					continue // a dependency from outside the graph
				}
				depth, dir := seen[it.row.ID].Depth+1, 1
				if up {
					depth, dir = seen[it.row.ID].Depth-1, -1
				}
				if whole {
					dir = 0
				}
				add(row, depth)
				queue = append(queue, item{row, dir})
			}
			edges[GraphEdge{Parent: e.Parent, Child: e.Child}] = true
		}
	}
	for _, n := range seen {
		view.Nodes = append(view.Nodes, n)
	}
	slices.SortFunc(view.Nodes, func(a, b *GraphNode) int { return cmpInt64(a.Job.ID, b.Job.ID) })
	for e := range edges {
		if seen[e.Parent] != nil && seen[e.Child] != nil {
			view.Edges = append(view.Edges, e)
		}
	}
	slices.SortFunc(view.Edges, func(a, b GraphEdge) int {
		if a.Child != b.Child {
			return cmpInt64(a.Child, b.Child)
		}
		return cmpInt64(a.Parent, b.Parent)
	})
	if whole {
		// Depth: the longest path from a first step (IDs ascend along edges).
		depth := map[int64]int{}
		for _, e := range view.Edges {
			if d := depth[e.Parent] + 1; d > depth[e.Child] {
				depth[e.Child] = d
			}
		}
		for _, n := range view.Nodes {
			n.Depth = depth[n.Job.ID]
		}
	}
	return view, nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GraphCancelResult is what GraphCancel did.
type GraphCancelResult struct {
	// Cancelled are the jobs cancelled at once.
	Cancelled []int64
	// Requested are the running jobs asked to cancel (see JobCancel).
	Requested []int64
}

// GraphCancel cancels every unfinished step of graph graphID (the ID of
// its first step, or of any step): waiting, pending and stuck ones at once,
// with a last error naming the graph; running ones get a cancellation
// request as JobCancel makes. Finished steps stay as they are. Steps are
// cancelled last first, so that each one records the graph's cancellation
// rather than its parent's.
func (c *Client[TTx]) GraphCancel(ctx context.Context, graphID int64) (*GraphCancelResult, error) {
	view, err := c.walkGraph(ctx, graphID, MaxGraphSteps, true)
	if err != nil {
		return nil, err
	}
	note := fmt.Sprintf("cancelled: graph %d was cancelled", view.ID)
	res := &GraphCancelResult{}
	for i := len(view.Nodes) - 1; i >= 0; i-- {
		id := view.Nodes[i].Job.ID
		row, err := c.core.setState(ctx, c.core.exec, "cancel", &driver.JobSetStateParams{ID: id, State: leasetype.JobStateCancelled, FromStates: waitingOrStuck(), Note: note})
		switch {
		case err == nil:
			res.Cancelled = append(res.Cancelled, id)
			continue
		case errors.Is(err, ErrNotFound):
			continue
		case !errors.Is(err, ErrJobState):
			return res, err
		case row == nil || row.State != leasetype.JobStateRunning:
			continue // finished already
		}
		row, err = c.JobCancel(ctx, id)
		switch {
		case err == nil && row.State == leasetype.JobStateRunning:
			res.Requested = append(res.Requested, id)
		case err == nil:
			res.Cancelled = append(res.Cancelled, id)
		case errors.Is(err, ErrJobState) || errors.Is(err, ErrNotFound):
		default:
			return res, err
		}
	}
	slices.Sort(res.Cancelled)
	slices.Sort(res.Requested)
	return res, nil
}
