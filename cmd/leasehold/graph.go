package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
)

// graphNodeJSON is a node as printed by jobs graph --json.
type graphNodeJSON struct {
	Job     *jobJSON `json:"job"`
	Stage   string   `json:"stage,omitempty"`
	GraphID int64    `json:"graph_id,omitempty"`
	Step    string   `json:"step,omitempty"`
	Depth   int      `json:"depth"`
	Parents []int64  `json:"parents"`
}

func newJobsGraphCmd(g *globalOptions) *cobra.Command {
	var (
		asJSON bool
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "graph ID",
		Short: "Show a job's dependencies: the jobs it waits for and the jobs waiting on it",
		Long: `graph prints a job with its upstream (the jobs it depends on, and theirs)
and its downstream (the jobs that depend on it, and on them), one line per
job indented by its distance: LEVEL -1 is a parent, +1 a child. Each line
gives the job's graph step (InsertGraph), state, last stage and parents.`,
		Example: `  leasehold jobs graph 42
  leasehold jobs graph 42 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			if limit < 1 || limit > leasehold.MaxGraphSteps {
				return fmt.Errorf("--limit %d is outside 1 to %d", limit, leasehold.MaxGraphSteps)
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				view, err := s.client.JobLineage(ctx, id, limit)
				if err != nil {
					return jobErr("graph", id, nil, err)
				}
				return writeGraph(cmd.OutOrStdout(), view, asJSON)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 200, fmt.Sprintf("most jobs shown, 1 to %d", leasehold.MaxGraphSteps))
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newJobsGraphCancelCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "graph-cancel ID",
		Short: "Cancel every unfinished step of a job graph",
		Long: `graph-cancel cancels the unfinished steps of the graph (InsertGraph) that
job ID is a step of: waiting, pending and stuck steps at once, with a last
error naming the graph; running steps are asked to cancel, as jobs cancel
does, and end cancelled when their workers stop them. Finished steps stay
as they are.`,
		Example: `  leasehold jobs graph-cancel 42
  leasehold jobs graph-cancel 42 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				row, err := s.client.JobGet(ctx, id)
				if err != nil {
					return jobErr("graph-cancel", id, nil, err)
				}
				if _, _, ok := leasehold.GraphNodeOf(row); !ok {
					return fmt.Errorf("job %d is not a step of a graph (jobs graph %d shows its dependencies)", id, id)
				}
				res, err := s.client.GraphCancel(ctx, id)
				if err != nil {
					return jobErr("graph-cancel", id, nil, err)
				}
				if asJSON {
					out := struct {
						Cancelled []int64 `json:"cancelled"`
						Requested []int64 `json:"requested"`
					}{Cancelled: append([]int64{}, res.Cancelled...), Requested: append([]int64{}, res.Requested...)}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Graph of job %d: %d steps cancelled, %d running steps asked to cancel\n", id, len(res.Cancelled), len(res.Requested))
				return nil
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

// writeGraph prints view upstream first (farthest first), then the job,
// then downstream.
func writeGraph(w io.Writer, view *leasehold.GraphView, asJSON bool) error {
	parents := map[int64][]int64{}
	for _, e := range view.Edges {
		parents[e.Child] = append(parents[e.Child], e.Parent)
	}
	nodes := append([]*leasehold.GraphNode(nil), view.Nodes...)
	// Nodes come in ID order; a stable sort by depth keeps it per level.
	slices.SortStableFunc(nodes, func(a, b *leasehold.GraphNode) int { return a.Depth - b.Depth })
	if asJSON {
		out := struct {
			ID        int64                 `json:"id"`
			Nodes     []*graphNodeJSON      `json:"nodes"`
			Edges     []leasehold.GraphEdge `json:"edges"`
			Truncated bool                  `json:"truncated"`
		}{ID: view.ID, Nodes: []*graphNodeJSON{}, Edges: view.Edges, Truncated: view.Truncated}
		if out.Edges == nil {
			out.Edges = []leasehold.GraphEdge{}
		}
		for _, n := range nodes {
			ps := parents[n.Job.ID]
			if ps == nil {
				ps = []int64{}
			}
			out.Nodes = append(out.Nodes, &graphNodeJSON{Job: toJobJSON(n.Job), Stage: n.Job.Stage, GraphID: n.GraphID, Step: n.Step, Depth: n.Depth, Parents: ps})
		}
		return writeJSON(w, out)
	}
	up, down := 0, 0
	for _, n := range nodes {
		switch {
		case n.Depth < 0:
			up++
		case n.Depth > 0:
			down++
		}
	}
	fmt.Fprintf(w, "Job %d: %d upstream, %d downstream\n", view.ID, up, down)
	t := newTable(w, "LEVEL", "ID", "STEP", "KIND", "QUEUE", "STATE", "STAGE", "PARENTS")
	for _, n := range nodes {
		level := fmt.Sprint(n.Depth)
		if n.Depth > 0 {
			level = "+" + level
		}
		mark := strings.Repeat("  ", abs(n.Depth))
		switch {
		case n.Depth < 0:
			mark += "↑ "
		case n.Depth > 0:
			mark += "↓ "
		default:
			mark += "● "
		}
		ps := make([]string, len(parents[n.Job.ID]))
		for i, p := range parents[n.Job.ID] {
			ps[i] = fmt.Sprint(p)
		}
		t.row(level, mark+fmt.Sprint(n.Job.ID), orDash(n.Step), n.Job.Kind, n.Job.Queue, n.Job.State, orDash(n.Job.Stage), orDash(strings.Join(ps, ",")))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if view.Truncated {
		fmt.Fprintf(w, "(truncated at %d jobs: raise --limit to see more)\n", len(nodes))
	}
	return nil
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
