package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/leasetype"
)

func newQueuesCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queues",
		Short: "List, pause and resume queues",
		Example: `  leasehold queues list
  leasehold queues pause payments
  leasehold queues resume payments`,
	}
	cmd.AddCommand(newQueuesListCmd(g), newQueuePauseCmd(g, true), newQueuePauseCmd(g, false))
	return cmd
}

// queueSummary is one queue's jobs by state and claimable backlog.
type queueSummary struct {
	Queue  string                       `json:"queue"`
	States map[leasetype.JobState]int64 `json:"states"`
	Total  int64                        `json:"total"`
	// Backlog is how many jobs could be claimed now.
	Backlog int64 `json:"backlog"`
	// OldestAge is how long the oldest claimable job has been due, in
	// seconds on the database clock; 0 without backlog.
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	// Paused reports whether claims from the queue are stopped.
	Paused bool `json:"paused"`
	// PausedAt is when it was paused.
	PausedAt *time.Time `json:"paused_at,omitempty"`
	oldest   string
}

// summarizeQueues gathers the per-queue counts and backlog, queues in name order.
func summarizeQueues(ctx context.Context, c operator) ([]*queueSummary, error) {
	counts, err := c.JobCounts(ctx)
	if err != nil {
		return nil, err
	}
	backlog, err := c.QueueBacklog(ctx)
	if err != nil {
		return nil, err
	}
	control, err := c.QueueList(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*queueSummary{}
	get := func(name string) *queueSummary {
		q := byName[name]
		if q == nil {
			q = &queueSummary{Queue: name, States: map[leasetype.JobState]int64{}, oldest: "-"}
			for _, s := range leasetype.JobStates() {
				q.States[s] = 0
			}
			byName[name] = q
		}
		return q
	}
	for _, c := range counts {
		q := get(c.Queue)
		q.States[c.State] += c.Count
		q.Total += c.Count
	}
	for _, b := range backlog {
		q := get(b.Queue)
		q.Backlog = b.Available
		q.OldestAgeSeconds = b.OldestAge.Seconds()
		if b.Available > 0 {
			q.oldest = fmtDuration(b.OldestAge)
		}
	}
	for _, info := range control {
		if info.Paused {
			// A paused queue is listed even without jobs: it still holds
			// back whatever is inserted next.
			q := get(info.Name)
			q.Paused, q.PausedAt = true, info.PausedAt
		}
	}
	out := make([]*queueSummary, 0, len(byName))
	for _, q := range byName {
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out, nil
}

// queuesTable writes one row per queue: counts by state, total, backlog and
// the age of the oldest claimable job.
func queuesTable(w io.Writer, qs []*queueSummary) error {
	header := []string{"QUEUE"}
	for _, s := range leasetype.JobStates() {
		header = append(header, upper(string(s)))
	}
	header = append(header, "TOTAL", "BACKLOG", "OLDEST", "STATUS")
	t := newTable(w, header...)
	for _, q := range qs {
		cells := []any{q.Queue}
		for _, s := range leasetype.JobStates() {
			cells = append(cells, q.States[s])
		}
		status := "active"
		if q.Paused {
			status = "paused since " + fmtTime(q.PausedAt)
		} else if q.Queue == allQueues {
			status = "-"
		}
		cells = append(cells, q.Total, q.Backlog, q.oldest, status)
		t.row(cells...)
	}
	return t.flush()
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func newQueuesListCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List queues: jobs by state, backlog and the age of the oldest claimable job",
		Long: `list shows, for every queue that has jobs, how many are in each state, the
backlog (jobs that could be claimed now), how long the oldest of them has
been due, measured on the database clock (a growing age means the workers
are not keeping up, or none works the queue), and whether it is paused.`,
		Example: `  leasehold queues list
  leasehold queues list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				qs, err := summarizeQueues(ctx, s.client)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), qs)
				}
				if len(qs) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no queues: no jobs yet")
					return nil
				}
				return queuesTable(cmd.OutOrStdout(), qs)
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newQueuePauseCmd(g *globalOptions, pause bool) *cobra.Command {
	name, short, long := "resume", "Resume a paused queue", `resume lets every client claim from the queue again: at once on Postgres
(clients are notified), within their poll interval on SQLite.`
	if pause {
		name, short, long = "pause", "Pause a queue: no client claims its jobs until resumed", `pause stops every client from claiming the queue's jobs; the check is part
of the claim statement, so it holds for clients on every host. Running jobs
go on and finish; inserts are accepted and wait. A queue without jobs yet
can be paused ahead of time.`
	}
	return &cobra.Command{
		Use:     name + " QUEUE",
		Short:   short,
		Long:    long,
		Example: "  leasehold queues " + name + " payments",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				qs, err := summarizeQueues(ctx, s.client)
				if err != nil {
					return err
				}
				var known *queueSummary
				for _, q := range qs {
					if q.Queue == queue {
						known = q
					}
				}
				switch {
				case pause && known != nil && known.Paused:
					fmt.Fprintf(cmd.OutOrStdout(), "queue %s is already paused (since %s)\n", queue, fmtTime(known.PausedAt))
					return nil
				case !pause && (known == nil || !known.Paused):
					return fmt.Errorf("cannot resume queue %s: it is not paused", queue)
				}
				if pause {
					if err := s.client.QueuePause(ctx, queue); err != nil {
						return err
					}
					if known == nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "note: queue %s has no jobs yet; paused ahead of time\n", queue)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "paused queue %s: no client claims its jobs until resumed\n", queue)
					return nil
				}
				if err := s.client.QueueResume(ctx, queue); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "resumed queue %s\n", queue)
				return nil
			})
		},
	}
}
