package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// graphSource is implemented by sources that walk dependency graphs
// (*leasehold.Client does): the job page draws its dependencies and the
// graph page its graph when the source has them.
type graphSource interface {
	JobLineage(ctx context.Context, id int64, limit int) (*leasehold.GraphView, error)
	Graph(ctx context.Context, graphID int64, limit int) (*leasehold.GraphView, error)
}

// graphCanceller is implemented by sources that cancel whole graphs
// (*leasehold.Client does): the graph page then has a Cancel button.
type graphCanceller interface {
	GraphCancel(ctx context.Context, graphID int64) (*leasehold.GraphCancelResult, error)
}

// Caps on what the pages read and draw: a graph is walked job by job.
const (
	// jobGraphNodes is the most jobs the job page's drawing shows.
	jobGraphNodes = 40
	// graphPageNodes is the most steps the graph page counts.
	graphPageNodes = 1000
	// graphDrawNodes is the most steps the graph page draws.
	graphDrawNodes = 120
)

// Layout of a dependency drawing: levels top to bottom (parents above
// children), at most depPerRow boxes per row so that it stays legible on a
// phone; a wide level wraps onto several rows.
const (
	depBoxW   = 112.0
	depBoxH   = 36.0
	depGapX   = 12.0
	depGapY   = 26.0
	depMargin = 6.0
	depPerRow = 3
)

// depNode is one box of a dependency drawing.
type depNode struct {
	ID           int64
	X, Y, W, H   float64
	TX, TY1, TY2 float64
	Class        string
	Label, Sub   string
	Title        string
	Current      bool
}

// depGraph is a dependency drawing: boxes (one per job, coloured by state,
// linking to the job) and a line per edge, parent to child.
type depGraph struct {
	W, H      float64
	Label     string
	Nodes     []*depNode
	Edges     []svgLine
	Truncated bool
	// Shown is the number of jobs drawn, of Total read.
	Shown, Total int64
}

// newDepGraph lays out view, drawing at most maxNodes jobs (those nearest
// the job asked about, by level, then by ID), and marks current.
func newDepGraph(view *leasehold.GraphView, current int64, maxNodes int, label string) *depGraph {
	nodes := append([]*leasehold.GraphNode(nil), view.Nodes...)
	g := &depGraph{Label: label, Total: int64(len(nodes)), Truncated: view.Truncated}
	if len(nodes) > maxNodes {
		near := append([]*leasehold.GraphNode(nil), nodes...)
		slices.SortStableFunc(near, func(a, b *leasehold.GraphNode) int { return abs(a.Depth) - abs(b.Depth) })
		keep := map[int64]bool{}
		for _, n := range near[:maxNodes] {
			keep[n.Job.ID] = true
		}
		nodes = slices.DeleteFunc(nodes, func(n *leasehold.GraphNode) bool { return !keep[n.Job.ID] })
		g.Truncated = true
	}
	g.Shown = int64(len(nodes))
	slices.SortStableFunc(nodes, func(a, b *leasehold.GraphNode) int { return a.Depth - b.Depth })
	at := map[int64]*depNode{}
	y := depMargin
	width := 0.0
	for i := 0; i < len(nodes); {
		j := i
		for j < len(nodes) && nodes[j].Depth == nodes[i].Depth {
			j++
		}
		level := nodes[i:j]
		for r := 0; r < len(level); r += depPerRow {
			row := level[r:min(r+depPerRow, len(level))]
			x := depMargin
			for _, n := range row {
				d := &depNode{
					ID: n.Job.ID, X: x, Y: y, W: depBoxW, H: depBoxH,
					TX: x + 6, TY1: y + 15, TY2: y + 29,
					Class: "st-" + string(n.Job.State), Current: n.Job.ID == current,
				}
				d.Label = truncate(labelOf(n), 15)
				d.Sub = truncate(fmt.Sprintf("%d · %s", n.Job.ID, n.Job.State), 17)
				if n.Job.Stage != "" {
					d.Sub = truncate(fmt.Sprintf("%s · %s", n.Job.State, n.Job.Stage), 17)
				}
				d.Title = fmt.Sprintf("job %d: %s, %s, %s", n.Job.ID, labelOf(n), n.Job.Kind, n.Job.State)
				if n.Job.Stage != "" {
					d.Title += ", stage " + n.Job.Stage
				}
				g.Nodes = append(g.Nodes, d)
				at[d.ID] = d
				x += depBoxW + depGapX
			}
			width = max(width, x-depGapX+depMargin)
			y += depBoxH + depGapY
		}
		i = j
	}
	g.W, g.H = max(width, depBoxW+2*depMargin), y-depGapY+depMargin
	for _, e := range view.Edges {
		p, c := at[e.Parent], at[e.Child]
		if p == nil || c == nil {
			continue
		}
		g.Edges = append(g.Edges, svgLine{X1: p.X + p.W/2, Y1: p.Y + p.H, X2: c.X + c.W/2, Y2: c.Y, Class: "edge"})
	}
	return g
}

// labelOf names a node: its step, else its kind.
func labelOf(n *leasehold.GraphNode) string {
	if n.Step != "" {
		return n.Step
	}
	return n.Job.Kind
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// jobGraph draws the job page's dependencies, when it has any.
func (h *handler) jobGraph(r *http.Request, d *jobData) error {
	src, ok := h.src.(graphSource)
	if !ok {
		return nil
	}
	d.GraphID, d.Step, _ = leasehold.GraphNodeOf(d.Job)
	if len(d.Upstream) == 0 && len(d.Downstream) == 0 {
		return nil
	}
	view, err := src.JobLineage(r.Context(), d.Job.ID, jobGraphNodes)
	if err != nil {
		return err
	}
	d.Graph = newDepGraph(view, d.Job.ID, jobGraphNodes, fmt.Sprintf("dependencies of job %d", d.Job.ID))
	return nil
}

// graphData is the graph page's.
type graphData struct {
	ID     int64
	First  *leasetype.JobRow
	Counts []stateCount
	// Finished counts the steps completed, discarded or cancelled.
	Finished, Total int64
	// Partial is set when the graph has more steps than were counted.
	Partial bool
	Graph   *depGraph
	// Bar is the progress bar: a segment per state, as wide as its share.
	Bar []svgRect
	// CanCancel is set when the graph has unfinished steps and the source
	// cancels graphs.
	CanCancel bool
}

// progressW and progressH size the graph page's progress bar.
const progressW, progressH = 320.0, 12.0

func (h *handler) graph(r *http.Request, p *pageData) error {
	p.template, p.Nav = "graph", "jobs"
	id, err := parseID("graph ID", r.PathValue("id"))
	if err != nil {
		return err
	}
	p.Title = fmt.Sprintf("Graph %d", id)
	src, ok := h.src.(graphSource)
	if !ok {
		return &httpError{code: http.StatusNotFound, msg: "this dashboard's source does not record job graphs"}
	}
	view, err := src.Graph(r.Context(), id, graphPageNodes)
	if err != nil {
		return err
	}
	d := &graphData{ID: view.ID, Total: int64(len(view.Nodes)), Partial: view.Truncated}
	p.Title = fmt.Sprintf("Graph %d", view.ID)
	counts := map[leasetype.JobState]int{}
	for _, n := range view.Nodes {
		counts[n.Job.State]++
		if n.Job.ID == view.ID {
			d.First = n.Job
		}
		switch n.Job.State {
		case leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled:
			d.Finished++
		}
	}
	for _, s := range leasetype.JobStates() {
		if counts[s] > 0 {
			d.Counts = append(d.Counts, stateCount{s, int64(counts[s])})
		}
	}
	x := 0.0
	for _, c := range d.Counts {
		w := progressW * float64(c.Count) / float64(d.Total)
		d.Bar = append(d.Bar, svgRect{X: x, Y: 0, W: w, H: progressH, Class: "st-" + string(c.State), Title: fmt.Sprintf("%d %s", c.Count, c.State)})
		x += w
	}
	d.Graph = newDepGraph(view, 0, graphDrawNodes, fmt.Sprintf("steps of graph %d", view.ID))
	_, cancels := h.src.(graphCanceller)
	d.CanCancel = cancels && (d.Finished < d.Total || d.Partial)
	if q := r.URL.Query(); q.Get("done") == "graph-cancel" {
		p.Flash = fmt.Sprintf("Graph %d was cancelled: %s steps cancelled, %s running steps asked to cancel (their workers end them).",
			view.ID, q.Get("cancelled"), q.Get("requested"))
	}
	p.Data = d
	return nil
}

// graphCancel cancels a graph's unfinished steps (Client.GraphCancel) and
// goes back to the graph page with what it did.
func (h *handler) graphCancel(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	if !h.allowPost(w, r, p) {
		return
	}
	id, err := parseID("graph ID", r.PathValue("id"))
	if err != nil {
		h.renderError(w, r, p, err)
		return
	}
	src, ok := h.src.(graphCanceller)
	if !ok {
		h.renderError(w, r, p, &httpError{code: http.StatusNotFound, msg: "this dashboard's source does not cancel job graphs"})
		return
	}
	res, err := src.GraphCancel(r.Context(), id)
	if err != nil {
		h.renderError(w, r, p, sourceError(err))
		return
	}
	target := fmt.Sprintf("%s/graphs/%d", p.Base, id)
	http.Redirect(w, r, withFlash(target, url.Values{"done": {"graph-cancel"},
		"cancelled": {strconv.Itoa(len(res.Cancelled))}, "requested": {strconv.Itoa(len(res.Requested))}}), http.StatusSeeOther)
}
