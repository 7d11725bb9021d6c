package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/leasetype"
)

// throughputWindows are the windows stats reports, in minutes, shortest first.
func throughputWindows() []int { return []int{10, 60} }

// throughputRow is the attempts of one queue that ended in one window.
type throughputRow struct {
	Queue   string `json:"queue"`
	Minutes int    `json:"window_minutes"`
	// Outcomes counts the ended attempts by outcome.
	Outcomes map[leasetype.AttemptOutcome]int64 `json:"outcomes"`
	// PerMinute is the completions per minute over the window.
	PerMinute float64 `json:"completed_per_minute"`
}

// statsReport is what stats prints.
type statsReport struct {
	Queues     []*queueSummary  `json:"queues"`
	Throughput []*throughputRow `json:"throughput"`
}

func newStatsCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Show jobs by queue and state, throughput of the last 10 and 60 minutes, and backlog",
		Long: `stats summarizes the queue: jobs per queue and state with the claimable
backlog and the age of its oldest job, then the attempts that ended in the
last 10 and 60 minutes per queue and outcome (completed, failed, panicked,
lease_expired, cancelled, snoozed, released). Lease expiries are crashes or
pauses of workers, counted apart from handler failures. Minutes are whole
minutes on the database clock, so a window may include part of one more.`,
		Example: `  leasehold stats
  leasehold stats --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rep, err := gatherStats(ctx, s.client, s.now(ctx))
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), rep)
				}
				return printStats(cmd, rep)
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func gatherStats(ctx context.Context, c operator, now time.Time) (*statsReport, error) {
	qs, err := summarizeQueues(ctx, c)
	if err != nil {
		return nil, err
	}
	longest := throughputWindows()[len(throughputWindows())-1]
	counts, err := c.JobThroughput(ctx, now.Add(-time.Duration(longest)*time.Minute).Truncate(time.Minute))
	if err != nil {
		return nil, err
	}
	rows := map[string]map[int]*throughputRow{}
	for _, tc := range counts {
		for _, w := range throughputWindows() {
			if tc.Minute.Before(now.Add(-time.Duration(w) * time.Minute).Truncate(time.Minute)) {
				continue
			}
			if rows[tc.Queue] == nil {
				rows[tc.Queue] = map[int]*throughputRow{}
			}
			r := rows[tc.Queue][w]
			if r == nil {
				r = &throughputRow{Queue: tc.Queue, Minutes: w, Outcomes: map[leasetype.AttemptOutcome]int64{}}
				rows[tc.Queue][w] = r
			}
			r.Outcomes[tc.Outcome] += tc.Count
		}
	}
	rep := &statsReport{Queues: qs, Throughput: []*throughputRow{}}
	for _, byWindow := range rows {
		for _, r := range byWindow {
			r.PerMinute = float64(r.Outcomes[leasetype.OutcomeCompleted]) / float64(r.Minutes)
			rep.Throughput = append(rep.Throughput, r)
		}
	}
	sort.Slice(rep.Throughput, func(i, j int) bool {
		a, b := rep.Throughput[i], rep.Throughput[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		return a.Minutes < b.Minutes
	})
	return rep, nil
}

// outcomeColumns are the attempt outcomes stats shows, in order.
func outcomeColumns() []leasetype.AttemptOutcome {
	return []leasetype.AttemptOutcome{
		leasetype.OutcomeCompleted, leasetype.OutcomeFailed, leasetype.OutcomePanicked, leasetype.OutcomeLeaseExpired,
		leasetype.OutcomeCancelled, leasetype.OutcomeSnoozed, leasetype.OutcomeReleased,
	}
}

func printStats(cmd *cobra.Command, rep *statsReport) error {
	out := cmd.OutOrStdout()
	fmt.Fprintln(out, "Jobs by queue and state")
	if len(rep.Queues) == 0 {
		fmt.Fprintln(out, "no jobs yet")
	} else if err := queuesTable(out, withTotal(rep.Queues)); err != nil {
		return err
	}
	fmt.Fprintln(out, "\nThroughput: attempts ended per queue and outcome")
	if len(rep.Throughput) == 0 {
		fmt.Fprintf(out, "no attempt ended in the last %d minutes\n", throughputWindows()[len(throughputWindows())-1])
		return nil
	}
	header := []string{"QUEUE", "WINDOW"}
	for _, o := range outcomeColumns() {
		header = append(header, upper(string(o)))
	}
	header = append(header, "COMPLETED/MIN")
	t := newTable(out, header...)
	for _, r := range rep.Throughput {
		cells := []any{r.Queue, fmt.Sprintf("%dm", r.Minutes)}
		for _, o := range outcomeColumns() {
			cells = append(cells, r.Outcomes[o])
		}
		cells = append(cells, fmt.Sprintf("%.1f", r.PerMinute))
		t.row(cells...)
	}
	return t.flush()
}

// allQueues names the total row of stats.
const allQueues = "(all)"

// withTotal appends a row summing every queue, when there is more than one.
func withTotal(qs []*queueSummary) []*queueSummary {
	if len(qs) < 2 {
		return qs
	}
	total := &queueSummary{Queue: allQueues, States: map[leasetype.JobState]int64{}, oldest: "-"}
	var oldest time.Duration
	for _, q := range qs {
		for s, n := range q.States {
			total.States[s] += n
		}
		total.Total += q.Total
		total.Backlog += q.Backlog
		if d := time.Duration(q.OldestAgeSeconds * float64(time.Second)); q.Backlog > 0 && d > oldest {
			oldest = d
			total.oldest = fmtDuration(d)
		}
	}
	return append(qs[:len(qs):len(qs)], total)
}
