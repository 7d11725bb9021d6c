package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/leasetype"
)

func newPeriodicCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "periodic",
		Aliases: []string{"schedules"},
		Short:   "List the periodic jobs' stored schedules",
		Example: `  leasehold periodic list
  leasehold schedules list --json`,
	}
	cmd.AddCommand(newPeriodicListCmd(g))
	return cmd
}

// overdueAfter is how far past its next run a schedule is flagged: a leader
// enqueues a due slot at once, and a new leader takes over within the leader
// lease (15 s by default).
const overdueAfter = time.Minute

// scheduleJSON is a periodic schedule as printed by periodic list --json.
type scheduleJSON struct {
	Name      string     `json:"name"`
	Spec      string     `json:"spec"`
	NextRunAt time.Time  `json:"next_run_at"`
	LastRunAt *time.Time `json:"last_run_at,omitempty"`
	LastJobID *int64     `json:"last_job_id,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

func newPeriodicListCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the periodic schedules: spec, next run, last run and its job",
		Long: `list shows every periodic schedule stored in the database, in name order:
the clients configured with PeriodicJobs register them (on any host). For
each: its spec, the next slot the fleet's periodic leader will enqueue, with
how far that is from now on the database clock, the last slot enqueued, and
that slot's job (see it with leasehold jobs show ID). A next run more than a
minute in the past is flagged overdue: no client with the periodic job is
running, or none can reach the database.`,
		Example: `  leasehold periodic list
  leasehold periodic list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rows, err := s.client.PeriodicSchedules(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]*scheduleJSON, 0, len(rows))
					for _, r := range rows {
						out = append(out, &scheduleJSON{Name: r.Name, Spec: r.Spec, NextRunAt: r.NextRunAt.UTC(),
							LastRunAt: utcPtr(r.LastRunAt), LastJobID: r.LastJobID, UpdatedAt: r.UpdatedAt.UTC()})
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				if len(rows) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no periodic schedules: a client configured with PeriodicJobs registers them when it becomes the periodic leader")
					return nil
				}
				return schedulesTable(cmd.OutOrStdout(), rows, s.now(ctx))
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

// schedulesTable writes one row per schedule.
func schedulesTable(w io.Writer, rows []*leasetype.PeriodicSchedule, now time.Time) error {
	t := newTable(w, "NAME", "SPEC", "NEXT RUN", "LAST RUN", "LAST JOB")
	for _, r := range rows {
		next := fmtTime(&r.NextRunAt) + " (" + relative(r.NextRunAt, now)
		if now.Sub(r.NextRunAt) > overdueAfter {
			next += ", overdue"
		}
		next += ")"
		last := fmtTime(r.LastRunAt)
		if r.LastRunAt != nil {
			last += " (" + relative(*r.LastRunAt, now) + ")"
		}
		job := "-"
		if r.LastJobID != nil {
			job = fmt.Sprint(*r.LastJobID)
		}
		t.row(r.Name, r.Spec, next, last, job)
	}
	return t.flush()
}

// relative says how far t is from now: "in 5m0s", "12s ago".
func relative(t, now time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + fmtDuration(d)
	}
	return fmtDuration(now.Sub(t)) + " ago"
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
