package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/leasetype"
)

// graphStepArgs is a step of the dashboard tests' graphs.
type graphStepArgs struct{}

func (graphStepArgs) Kind() string { return "graph_step" }

// graphInserter is what the tests use of the client to make a graph.
type graphInserter interface {
	InsertGraph(ctx context.Context, g *leasehold.Graph) (*leasehold.GraphResult, error)
}

// insertDiamond inserts authorize → capture, authorize → fraud-check,
// both → ledger, and returns the IDs by step.
func (e *env) insertDiamond() map[string]int64 {
	e.t.Helper()
	g := leasehold.NewGraph()
	a := g.Add("authorize", graphStepArgs{}, nil)
	c := g.Add("capture", graphStepArgs{}, nil, a)
	f := g.Add("fraud-check", graphStepArgs{}, nil, a)
	g.Add("ledger", graphStepArgs{}, nil, c, f)
	res, err := e.client.(graphInserter).InsertGraph(context.Background(), g)
	if err != nil {
		e.t.Fatalf("InsertGraph: %v", err)
	}
	return res.IDs
}

var (
	svgNode = regexp.MustCompile(`<a href="/jobs/(\d+)" class="node"><rect class="(st-[a-z]+)( current)?"`)
	svgEdge = regexp.MustCompile(`<line class="edge" x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)"/>`)
)

// drawing returns the jobs drawn in body's dependency SVG (ID → class),
// the current one, and the number of edges; it fails the test when body
// has no such SVG.
func drawing(t *testing.T, body string) (nodes map[int64]string, current int64, edges int) {
	t.Helper()
	i := strings.Index(body, `<svg class="depgraph" `)
	if i < 0 {
		t.Fatalf("no dependency SVG in the page:\n%s", body)
	}
	svg := body[i : i+strings.Index(body[i:], "</svg>")]
	nodes = map[int64]string{}
	for _, m := range svgNode.FindAllStringSubmatch(svg, -1) {
		var id int64
		fmt.Sscan(m[1], &id)
		nodes[id] = m[2]
		if m[3] != "" {
			current = id
		}
	}
	return nodes, current, len(svgEdge.FindAllString(svg, -1))
}

func TestJobGraphSVG(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		ids := e.insertDiamond()

		// capture: its parent and its child, not its sibling.
		r := e.get(fmt.Sprintf("/jobs/%d", ids["capture"]))
		if r.code != http.StatusOK {
			t.Fatalf("job page: %d", r.code)
		}
		nodes, current, edges := drawing(t, r.body)
		want := map[int64]string{ids["authorize"]: "st-available", ids["capture"]: "st-pending", ids["ledger"]: "st-pending"}
		if fmt.Sprint(nodes) != fmt.Sprint(want) || current != ids["capture"] || edges != 2 {
			t.Fatalf("capture's drawing: nodes %v (current %d), %d edges; want %v (current %d), 2 edges", nodes, current, edges, want, ids["capture"])
		}
		if !strings.Contains(r.body, fmt.Sprintf(`step <span class="mono">capture</span> of <a href="/graphs/%d">graph %d</a>`, ids["authorize"], ids["authorize"])) {
			t.Errorf("job page does not name its step and link its graph")
		}

		// The first step: every job, a node each, an edge per dependency.
		nodes, _, edges = drawing(t, e.get(fmt.Sprintf("/jobs/%d", ids["authorize"])).body)
		if len(nodes) != 4 || edges != 4 {
			t.Fatalf("authorize's drawing: %d nodes, %d edges; want 4 and 4", len(nodes), edges)
		}

		// The graph page: counts, progress, the whole drawing.
		r = e.get(fmt.Sprintf("/graphs/%d", ids["ledger"]))
		if r.code != http.StatusOK {
			t.Fatalf("graph page: %d\n%s", r.code, r.body)
		}
		nodes, current, edges = drawing(t, r.body)
		var got []int64
		for id := range nodes {
			got = append(got, id)
		}
		slices.Sort(got)
		wantIDs := []int64{ids["authorize"], ids["capture"], ids["fraud-check"], ids["ledger"]}
		if fmt.Sprint(got) != fmt.Sprint(wantIDs) || current != 0 || edges != 4 {
			t.Fatalf("graph drawing: nodes %v, current %d, %d edges; want %v, none, 4", got, current, edges, wantIDs)
		}
		for _, s := range []string{fmt.Sprintf("Graph <span class=\"mono\">%d</span>", ids["authorize"]), "0 of 4 steps finished",
			`<span class="badge st-pending">pending</span> <b>3</b>`, `<span class="badge st-available">available</span> <b>1</b>`, "<title>3 pending</title>"} {
			if !strings.Contains(r.body, s) {
				t.Errorf("graph page lacks %q", s)
			}
		}

		// Not graphs.
		plain := e.insert("email", "default", `{}`, "", nil)
		if r := e.get(fmt.Sprintf("/graphs/%d", plain)); r.code != http.StatusNotFound {
			t.Errorf("graph page of a job outside graphs: %d, want 404", r.code)
		}
		if r := e.get("/graphs/999999"); r.code != http.StatusNotFound {
			t.Errorf("graph page of an unknown ID: %d, want 404", r.code)
		}
		if r := e.get(fmt.Sprintf("/jobs/%d", plain)); strings.Contains(r.body, `class="depgraph"`) {
			t.Errorf("a job without dependencies has a dependency drawing")
		}
	})
}

// insertWideGraph inserts, in queue graphs, a split step fanning out to
// parts steps that fan in to a join, and returns the IDs by step.
func (e *env) insertWideGraph(parts int) map[string]int64 {
	e.t.Helper()
	g := leasehold.NewGraph()
	opts := &leasehold.InsertOpts{Queue: "graphs"}
	split := g.Add("split-settlements", graphStepArgs{}, opts)
	var fan []leasehold.GraphStep
	for i := range parts {
		fan = append(fan, g.Add(fmt.Sprintf("payout-merchant-%d", i+1), graphStepArgs{}, opts, split))
	}
	g.Add("settlement-report", graphStepArgs{}, opts, fan...)
	res, err := e.client.(graphInserter).InsertGraph(context.Background(), g)
	if err != nil {
		e.t.Fatalf("InsertGraph: %v", err)
	}
	return res.IDs
}

// TestGraphCancel: the graph page's Cancel button cancels every unfinished
// step and says so; a read-only dashboard has no button and refuses the
// POST.
func TestGraphCancel(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		ids := e.insertDiamond()
		page := fmt.Sprintf("/graphs/%d", ids["authorize"])

		ro := e.handler(&dashboard.Options{ReadOnly: true})
		r := do(t, ro, httptest.NewRequest(http.MethodGet, page, nil))
		mustNotContain(t, "read-only graph page", r.body, "/cancel\"", "Cancel graph")
		if r := e.post(ro, e.session(ro, page), page+"/cancel", nil); r.code != http.StatusForbidden {
			t.Fatalf("read-only graph cancel = %d, want 403", r.code)
		}
		if j := e.job(ids["ledger"]); j.State != leasetype.JobStatePending {
			t.Fatalf("a refused POST changed the graph: ledger is %s", j.State)
		}

		r = e.get(page)
		mustContain(t, "graph page", r.body, fmt.Sprintf(`action="/graphs/%d/cancel"`, ids["authorize"]), "Cancel graph")
		res := e.post(e.h, e.session(e.h, page), fmt.Sprintf("/graphs/%d/cancel", ids["capture"]), nil)
		if res.code != http.StatusSeeOther {
			t.Fatalf("graph cancel = %d:\n%s", res.code, res.body)
		}
		loc := res.hdr.Get("Location")
		for step, id := range ids {
			if j := e.job(id); j.State != leasetype.JobStateCancelled {
				t.Errorf("step %s (job %d) is %s after the graph was cancelled, want cancelled", step, id, j.State)
			}
		}
		r = e.get(loc)
		mustContain(t, "graph page after cancel", r.body, fmt.Sprintf("Graph %d was cancelled: 4 steps cancelled, 0 running steps asked to cancel", ids["authorize"]), "4 of 4 steps finished")
		mustNotContain(t, "finished graph page", r.body, "Cancel graph")

		if r := e.post(e.h, e.session(e.h, page), "/graphs/999999/cancel", nil); r.code != http.StatusNotFound {
			t.Errorf("cancel of an unknown graph = %d, want 404", r.code)
		}
	})
}
