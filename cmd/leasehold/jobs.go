package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

func newJobsCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List, inspect, retry, cancel and discard jobs",
		Example: `  leasehold jobs list --state discarded --queue payments
  leasehold jobs show 42
  leasehold jobs retry 42 43`,
	}
	cmd.AddCommand(newJobsListCmd(g), newJobsShowCmd(g),
		newJobActionCmd(g, jobActions()["retry"]),
		newJobActionCmd(g, jobActions()["cancel"]),
		newJobActionCmd(g, jobActions()["discard"]),
		newJobsDeleteCmd(g), newJobsGraphCmd(g), newJobsGraphCancelCmd(g))
	return cmd
}

// jobsListOptions are jobs list's flags.
type jobsListOptions struct {
	states                 []string
	queue, kind, uniqueKey string
	key, sequence          string
	limit                  int
	beforeID               int64
	json                   bool
}

func newJobsListCmd(g *globalOptions) *cobra.Command {
	o := &jobsListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Long: `list shows jobs newest first, filtered by state, queue, kind or unique key.
Page backwards with --before-id set to the last ID shown.

States: ` + statesList() + `.`,
		Example: `  leasehold jobs list
  leasehold jobs list --state running,stuck --queue payments
  leasehold jobs list --kind charge --limit 20 --before-id 1200 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := o.params()
			if err != nil {
				return err
			}
			p.Limit++ // one more than shown tells whether more match
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rows, err := s.client.JobList(ctx, p)
				if err != nil {
					return err
				}
				more := len(rows) > o.limit
				if more {
					rows = rows[:o.limit]
				}
				if err := printJobs(cmd, rows, o.json, "no jobs match", s.now(ctx)); err != nil {
					return err
				}
				if more {
					fmt.Fprintf(cmd.ErrOrStderr(), "more jobs match: the next %d with --before-id %d\n", o.limit, rows[len(rows)-1].ID)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.states, "state", nil, "only jobs in these states (comma-separated or repeated)")
	f.StringVar(&o.queue, "queue", "", "only jobs of this queue")
	f.StringVar(&o.kind, "kind", "", "only jobs of this kind")
	f.StringVar(&o.uniqueKey, "unique-key", "", "only jobs with this unique key")
	f.StringVar(&o.key, "key", "", "only jobs with this flow-control key (InsertOpts.Key, WorkerOpts.KeyBy)")
	f.StringVar(&o.sequence, "sequence", "", "only jobs of this sequence (InsertOpts.Sequence, WorkerOpts.SequenceBy)")
	f.IntVar(&o.limit, "limit", 50, "most jobs shown, 1 to 10000")
	f.Int64Var(&o.beforeID, "before-id", 0, "only jobs with an ID below this (paging)")
	addJSONFlag(cmd, &o.json)
	return cmd
}

func (o *jobsListOptions) params() (*leasehold.JobListParams, error) {
	if o.limit < 1 || o.limit > 10000 {
		return nil, fmt.Errorf("--limit %d is outside 1 to 10000", o.limit)
	}
	if o.beforeID < 0 {
		return nil, fmt.Errorf("--before-id %d is negative", o.beforeID)
	}
	states, err := parseStates(o.states)
	if err != nil {
		return nil, err
	}
	return &leasehold.JobListParams{States: states, Queue: o.queue, Kind: o.kind, UniqueKey: o.uniqueKey, Key: o.key, Sequence: o.sequence, BeforeID: o.beforeID, Limit: o.limit}, nil
}

func parseStates(in []string) ([]leasetype.JobState, error) {
	var out []leasetype.JobState
	for _, s := range in {
		st := leasetype.JobState(strings.ToLower(strings.TrimSpace(s)))
		if !st.Valid() {
			return nil, fmt.Errorf("--state %q is not a job state (want one of %s)", s, statesList())
		}
		out = append(out, st)
	}
	return out, nil
}

func statesList() string {
	var names []string
	for _, s := range leasetype.JobStates() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// printJobs prints rows as a table, or JSON; empty says so on stderr.
func printJobs(cmd *cobra.Command, rows []*leasetype.JobRow, asJSON bool, empty string, now time.Time) error {
	if asJSON {
		out := make([]*jobJSON, 0, len(rows))
		for _, r := range rows {
			out = append(out, toJobJSON(r))
		}
		return writeJSON(cmd.OutOrStdout(), out)
	}
	if len(rows) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), empty)
		return nil
	}
	return jobsTable(cmd.OutOrStdout(), rows, now)
}

// parseID parses a job ID argument.
func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, fmt.Errorf("job ID %q is not a positive integer", s)
	}
	return id, nil
}

// attemptJSON is an attempt as printed by jobs show --json.
type attemptJSON = leasetype.AttemptRow

func newJobsShowCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a job and its attempt history",
		Long: `show prints a job's fields, its arguments and metadata, and its attempt
history: one row per lease that has ended, with its owner, fencing token,
lease window, heartbeats, outcome and error. A running job's current lease
and the time it has left (on the database clock) are shown with the job.`,
		Example: `  leasehold jobs show 42
  leasehold jobs show 42 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				row, err := s.client.JobGet(ctx, id)
				if err != nil {
					return jobErr("show", id, nil, err)
				}
				attempts, err := s.client.JobAttempts(ctx, id)
				if err != nil {
					return jobErr("show", id, nil, err)
				}
				out := cmd.OutOrStdout()
				if asJSON {
					if attempts == nil {
						attempts = []*attemptJSON{}
					}
					return writeJSON(out, struct {
						Job      *jobJSON       `json:"job"`
						Attempts []*attemptJSON `json:"attempts"`
					}{toJobJSON(row), attempts})
				}
				if err := writeJobDetail(out, row, s.now(ctx)); err != nil {
					return err
				}
				fmt.Fprintf(out, "\nAttempts (%d ended)\n", len(attempts))
				if len(attempts) == 0 {
					fmt.Fprintln(out, "none yet")
					return nil
				}
				t := newTable(out, "ATTEMPT", "TOKEN", "OWNER", "LEASED", "LEASE UNTIL", "HEARTBEATS", "FINISHED", "DURATION", "OUTCOME", "ERROR")
				for _, a := range attempts {
					t.row(a.Attempt, a.Token, a.Owner, fmtTime(&a.LeasedAt), fmtTime(&a.LeaseUntil), a.Heartbeats,
						fmtTime(&a.FinishedAt), fmtDuration(a.FinishedAt.Sub(a.LeasedAt)), a.Outcome, orDash(truncate(a.Error, 80)))
				}
				return t.flush()
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}

// writeJobDetail writes one job as aligned "field  value" lines.
func writeJobDetail(w io.Writer, r *leasetype.JobRow, now time.Time) error {
	t := newTable(w)
	t.row("ID", r.ID)
	t.row("Kind", r.Kind)
	t.row("Queue", r.Queue)
	t.row("State", r.State)
	if r.CancelRequestedAt != nil {
		note := ""
		if r.State == leasetype.JobStateRunning {
			note = " (its worker cancels the handler; the job then ends cancelled)"
		}
		t.row("Cancel requested", fmtTime(r.CancelRequestedAt)+note)
	}
	t.row("Priority", r.Priority)
	t.row("Attempt", fmt.Sprintf("%d of at most %d handler failures", r.Attempt, r.MaxAttempts))
	t.row("Errors", r.Errors)
	t.row("Lease expiries", r.Expiries)
	t.row("Unique key", orDash(r.UniqueKey))
	t.row("Key", orDash(r.Key))
	t.row("Sequence", orDash(r.Sequence))
	t.row("Scheduled", fmtTime(&r.ScheduledAt))
	t.row("Created", fmtTime(&r.CreatedAt))
	t.row("Finalized", fmtTime(r.FinalizedAt))
	if r.LeaseTTL > 0 {
		t.row("Lease TTL", r.LeaseTTL)
	}
	if r.LeaseToken > 0 {
		label := "Last lease"
		if r.State == leasetype.JobStateRunning {
			label = "Lease"
		}
		t.row(label, fmt.Sprintf("token %d, owner %s, %s to %s, %d heartbeats (last %s)",
			r.LeaseToken, orDash(r.LeaseOwner), fmtTime(r.LeasedAt), fmtTime(r.LeaseUntil), r.Heartbeats, fmtTime(r.HeartbeatAt)))
	}
	if r.State == leasetype.JobStateRunning {
		t.row("Lease left", leaseLeft(r, now))
	}
	if r.ExpiryPolicy != "" {
		t.row("Expiry policy", r.ExpiryPolicy)
	}
	t.row("Last error", orDash(r.LastError))
	t.row("Args", compact(r.EncodedArgs))
	t.row("Metadata", compact(r.Metadata))
	return t.flush()
}

// jobAction is an operator action on jobs by ID.
type jobAction struct {
	name, past, short, long string
	// why explains, for an error, why the action does not apply to a state.
	why func(leasetype.JobState) string
	run func(ctx context.Context, c operator, id int64) (*leasetype.JobRow, error)
	// outcome names what the action did to a job, for people (the line
	// printed) and for scripts (--json's "result"); nil means past and
	// "now STATE".
	outcome func(row *leasetype.JobRow) (line, result string)
}

// actionOutcome is what an action did to one job.
func (a jobAction) actionOutcome(row *leasetype.JobRow) (line, result string) {
	if a.outcome != nil {
		return a.outcome(row)
	}
	return fmt.Sprintf("%s job %d: now %s", a.past, row.ID, row.State), a.past
}

func jobActions() map[string]jobAction {
	return map[string]jobAction{
		"retry": {
			name: "retry", past: "retried", short: "Make jobs available to run again now",
			long: `retry makes each job available now, with its error and lease-expiry counts
reset: a discarded, cancelled, completed, stuck, retryable or scheduled job
runs again. A running job cannot be retried: its lease must end first.`,
			why: func(s leasetype.JobState) string {
				if s == leasetype.JobStateRunning {
					return "a running job is retried only after its lease ends"
				}
				return "it is waiting to run already"
			},
			run: func(ctx context.Context, c operator, id int64) (*leasetype.JobRow, error) { return c.JobRetry(ctx, id) },
		},
		"cancel": {
			name: "cancel", past: "cancelled", short: "Cancel jobs: waiting and stuck ones at once, running ones through their worker",
			long: `cancel moves each waiting (available, scheduled, retryable) or stuck job to
cancelled; it will not run unless retried.

A running job gets a cancellation request instead, reported as
"cancellation requested": the job is still running when the command
returns. The client holding its lease cancels the handler's context
(context.Cause is leasehold.ErrJobCancelled) within its CancelCheckInterval
(250 ms by default); the attempt is recorded as cancelled and the job ends
cancelled, never to run again, unless the handler completes it first or
returns leasehold.Permanent, which stand. If its worker is gone, the job
ends cancelled when its lease expires. Follow it with leasehold jobs show ID.

A completed, discarded or cancelled job cannot be cancelled.`,
			why: func(leasetype.JobState) string {
				return "only waiting, stuck or running jobs can be cancelled"
			},
			run: func(ctx context.Context, c operator, id int64) (*leasetype.JobRow, error) {
				return c.JobCancel(ctx, id)
			},
			outcome: func(row *leasetype.JobRow) (string, string) {
				if row.State == leasetype.JobStateRunning {
					return fmt.Sprintf("cancellation requested for job %d (at %s): still running until its worker cancels the handler; it then ends cancelled",
						row.ID, fmtTime(row.CancelRequestedAt)), resultCancelRequested
				}
				return fmt.Sprintf("cancelled job %d: now %s", row.ID, row.State), "cancelled"
			},
		},
		"discard": {
			name: "discard", past: "discarded", short: "Discard waiting or stuck jobs",
			long: `discard moves each waiting (available, scheduled, retryable) or stuck job to
discarded, as if it had run out of attempts.`,
			why: waitingOnly("discarded"),
			run: func(ctx context.Context, c operator, id int64) (*leasetype.JobRow, error) {
				return c.JobDiscard(ctx, id)
			},
		},
	}
}

// waitingOnly is the why of actions that apply to waiting and stuck jobs.
func waitingOnly(past string) func(leasetype.JobState) string {
	return func(s leasetype.JobState) string {
		if s == leasetype.JobStateRunning {
			return "a running job cannot be " + past + " from outside; its handler decides, or its lease must end first"
		}
		return "only available, scheduled, retryable or stuck jobs can be " + past
	}
}

// resultCancelRequested is the --json result of cancelling a running job.
const resultCancelRequested = "cancel_requested"

func newJobActionCmd(g *globalOptions, a jobAction) *cobra.Command {
	var asJSON bool
	bulk := &bulkOptions{}
	results := `"` + a.past + `"`
	if a.name == "cancel" {
		results += ` or "` + resultCancelRequested + `"`
	}
	cmd := &cobra.Command{
		Use:   a.name + " ID... | " + a.name + " --state STATE [--queue Q] [--kind K] [--older-than AGE] [--yes]",
		Short: a.short,
		Long: a.long + `

Each ID is reported; the command exits non-zero if any failed. With --json,
stdout holds a JSON array with one object per ID: {"id", "result": ` + results + `,
"job": the row after the action} or {"id", "error"}; errors also go to stderr.` + bulkHelp,
		Example: fmt.Sprintf("  leasehold jobs %s 42\n  leasehold jobs %s 42 43 44\n  leasehold jobs %s 42 --json\n  leasehold jobs %s --state %s --queue payments --older-than 1h --yes",
			a.name, a.name, a.name, a.name, map[string]string{"retry": "discarded", "cancel": "scheduled", "discard": "retryable"}[a.name]),
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 || bulk.used(cmd) {
				if len(args) > 0 {
					return fmt.Errorf("give job IDs or a filter (--state ...), not both")
				}
				return runBulk(cmd, g, bulk, leasehold.BulkAction(a.name))
			}
			ids := make([]int64, len(args))
			for i, s := range args {
				id, err := parseID(s)
				if err != nil {
					return err
				}
				ids[i] = id
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				return eachID(cmd, s, ids, a, asJSON, func(id int64) (*leasetype.JobRow, error) {
					row, err := a.run(ctx, s.client, id)
					if err != nil {
						why := ""
						if row != nil {
							why = a.why(row.State)
						}
						return nil, jobErr(a.name, id, row, err, why)
					}
					return row, nil
				})
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: one object per ID, with the job's row after the action")
	addBulkFlags(cmd, bulk)
	return cmd
}

// actionResultJSON is one ID's outcome of a job action, printed with --json.
type actionResultJSON struct {
	ID     int64    `json:"id"`
	Result string   `json:"result,omitempty"`
	Job    *jobJSON `json:"job,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// eachID runs do on every ID, reports each outcome (successes on stdout,
// failures on stderr; with asJSON, both on stdout as JSON too) and fails
// when any failed.
func eachID(cmd *cobra.Command, s *session, ids []int64, a jobAction, asJSON bool, do func(int64) (*leasetype.JobRow, error)) error {
	failed := 0
	results := make([]*actionResultJSON, 0, len(ids))
	for _, id := range ids {
		row, err := do(id)
		if err != nil {
			failed++
			err = s.explain(err)
			fmt.Fprintln(cmd.ErrOrStderr(), termSafe(err.Error()))
			results = append(results, &actionResultJSON{ID: id, Error: err.Error()})
			if cmd.Context().Err() != nil {
				break
			}
			continue
		}
		line, result := a.actionOutcome(row)
		results = append(results, &actionResultJSON{ID: id, Result: result, Job: toJobJSON(row)})
		if !asJSON {
			fmt.Fprintln(cmd.OutOrStdout(), termSafe(line))
		}
	}
	if asJSON {
		if err := writeJSON(cmd.OutOrStdout(), results); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d jobs failed", a.name, failed, len(ids))
	}
	return nil
}

// jobErr turns an error about one job into a message that names the job
// and, when the action does not apply to its state, the state and why.
func jobErr(action string, id int64, row *leasetype.JobRow, err error, why ...string) error {
	switch {
	case errors.Is(err, leasehold.ErrNotFound):
		return fmt.Errorf("job %d not found", id)
	case errors.Is(err, leasehold.ErrJobState) && row != nil:
		msg := fmt.Sprintf("cannot %s job %d: it is %s", action, id, row.State)
		if len(why) > 0 && why[0] != "" {
			msg += " (" + why[0] + ")"
		}
		return errors.New(msg)
	}
	return err
}

// compact returns stored JSON on one line without spaces, as it was given:
// Postgres' jsonb reformats it.
func compact(b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, rawOr(b, "{}")); err != nil {
		return string(b)
	}
	return buf.String()
}
