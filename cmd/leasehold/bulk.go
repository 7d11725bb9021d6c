package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
)

// bulkOptions are the filter flags of a bulk job action: without job IDs,
// jobs retry, cancel, discard and delete act on every job matching them.
type bulkOptions struct {
	states      []string
	queue, kind string
	olderThan   time.Duration
	batch       int
	note        string
	yes         bool
}

// bulkHelp explains the bulk form of an action.
const bulkHelp = `

Without IDs, the command acts on every job matching --state (required),
--queue, --kind and --older-than (created longer ago than that, on the
database clock). It first counts them and says what would happen; it acts
only with --yes, or when you answer y at the prompt (when stdin is a
terminal); otherwise it exits non-zero having changed nothing. Jobs are
changed in batches of --batch-size (1,000) per statement, so a huge set
never holds its locks for long; each batch is recorded in the audit trail
(leasehold audit) as cli:$USER@host. Running jobs are never retried,
discarded or deleted; cancel asks running jobs to stop, as cancel ID does.`

// addBulkFlags adds the bulk filter flags to an action's command.
func addBulkFlags(cmd *cobra.Command, o *bulkOptions) {
	f := cmd.Flags()
	f.StringSliceVar(&o.states, "state", nil, "without IDs: act on every job in these states (comma-separated or repeated)")
	f.StringVar(&o.queue, "queue", "", "without IDs: only jobs of this queue")
	f.StringVar(&o.kind, "kind", "", "without IDs: only jobs of this kind")
	f.DurationVar(&o.olderThan, "older-than", 0, "without IDs: only jobs created longer ago than this (e.g. 1h, 72h)")
	f.IntVar(&o.batch, "batch-size", leasehold.DefaultBulkBatchSize, "without IDs: most jobs changed per statement, 1 to 10000")
	f.StringVar(&o.note, "note", "", "without IDs: why, kept in the audit trail and as the jobs' last error")
	f.BoolVar(&o.yes, "yes", false, "without IDs: act without asking")
}

// used reports whether any bulk flag was given.
func (o *bulkOptions) used(cmd *cobra.Command) bool {
	for _, name := range []string{"state", "queue", "kind", "older-than", "batch-size", "note", "yes"} {
		if cmd.Flags().Changed(name) {
			return true
		}
	}
	return false
}

// params checks the flags and builds the bulk action.
func (o *bulkOptions) params(action leasehold.BulkAction) (*leasehold.BulkParams, error) {
	if len(o.states) == 0 {
		return nil, fmt.Errorf("give job IDs, or --state (with --queue, --kind, --older-than) to %s every matching job", action)
	}
	states, err := parseStates(o.states)
	if err != nil {
		return nil, err
	}
	if o.olderThan < 0 {
		return nil, fmt.Errorf("--older-than %s is negative", o.olderThan)
	}
	if o.batch < 1 || o.batch > 10000 {
		return nil, fmt.Errorf("--batch-size %d is outside 1 to 10000", o.batch)
	}
	return &leasehold.BulkParams{Action: action, States: states, Queue: o.queue, Kind: o.kind, OlderThan: o.olderThan, BatchSize: o.batch, Note: o.note}, nil
}

// describe says which jobs a bulk action selects, for people.
func describeBulk(p *leasehold.BulkParams) string {
	var b strings.Builder
	for i, s := range p.States {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString(string(s))
	}
	b.WriteString(" jobs")
	if p.Queue != "" {
		fmt.Fprintf(&b, " of queue %s", p.Queue)
	}
	if p.Kind != "" {
		fmt.Fprintf(&b, " of kind %s", p.Kind)
	}
	if p.OlderThan > 0 {
		fmt.Fprintf(&b, " created more than %s ago", p.OlderThan)
	}
	return b.String()
}

// bulkOutcome says what an action does to each job, for the count line.
var bulkOutcome = map[leasehold.BulkAction]string{
	leasehold.BulkRetry:   "each becomes available and runs again, its error count reset",
	leasehold.BulkDiscard: "each is discarded and will not run unless retried",
	leasehold.BulkCancel:  "waiting and stuck ones are cancelled; running ones are asked to stop",
	leasehold.BulkDelete:  "each is deleted; this cannot be undone",
}

// stdinIsTerminal reports whether r is an interactive terminal: a
// character device other than the null device (which a service manager or
// `< /dev/null` gives, and which must never count as a yes).
func stdinIsTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	if null, err := os.Stat(os.DevNull); err == nil && os.SameFile(st, null) {
		return false
	}
	return true
}

// runBulk counts, confirms and runs a bulk action.
func runBulk(cmd *cobra.Command, g *globalOptions, o *bulkOptions, action leasehold.BulkAction) error {
	p, err := o.params(action)
	if err != nil {
		return err
	}
	return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
		n, err := s.client.JobBulkCount(ctx, p)
		if err != nil {
			return err
		}
		what := describeBulk(p)
		out := cmd.OutOrStdout()
		if n == 0 && o.yes {
			fmt.Fprintf(out, "%s 0 jobs: none matches (%s)\n", action, termSafe(what))
			_, err := s.client.JobBulk(ctx, p) // recorded in the audit trail as a run that changed nothing
			return err
		}
		if n == 0 {
			fmt.Fprintf(out, "no %s: nothing to %s\n", termSafe(what), action)
			return nil
		}
		if !o.yes {
			fmt.Fprintf(out, "%s %s %s: %s.\n", action, groupDigits(n), termSafe(what), bulkOutcome[action])
			if !stdinIsTerminal(cmd.InOrStdin()) {
				return fmt.Errorf("not done: add --yes to %s these %s jobs", action, groupDigits(n))
			}
			fmt.Fprintf(out, "Proceed? [y/N] ")
			answer, _ := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
			if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
				return fmt.Errorf("not done: not confirmed")
			}
		}
		res, err := s.client.JobBulk(ctx, p)
		if res != nil && res.Changed+res.CancelRequested > 0 {
			printBulk(out, action, res)
		}
		if err != nil {
			return err
		}
		if res.Changed+res.CancelRequested == 0 {
			printBulk(out, action, res)
		}
		if len(res.Conflicts) > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "skipped %d jobs whose unique key another job holds: %s\n", len(res.Conflicts), idList(res.Conflicts, 20))
		}
		return nil
	})
}

func printBulk(w io.Writer, action leasehold.BulkAction, res *leasehold.BulkResult) {
	past := map[leasehold.BulkAction]string{leasehold.BulkRetry: "retried", leasehold.BulkDiscard: "discarded", leasehold.BulkCancel: "cancelled", leasehold.BulkDelete: "deleted"}[action]
	fmt.Fprintf(w, "%s %s jobs in %d batches", past, groupDigits(res.Changed), res.Batches)
	if res.CancelRequested > 0 {
		fmt.Fprintf(w, "; cancellation requested for %s running jobs (their workers end them)", groupDigits(res.CancelRequested))
	}
	fmt.Fprintln(w)
}

func idList(ids []int64, max int) string {
	var parts []string
	for i, id := range ids {
		if i == max {
			parts = append(parts, fmt.Sprintf("and %d more", len(ids)-max))
			break
		}
		parts = append(parts, fmt.Sprint(id))
	}
	return strings.Join(parts, ", ")
}

func newJobsDeleteCmd(g *globalOptions) *cobra.Command {
	o := &bulkOptions{}
	cmd := &cobra.Command{
		Use:   "delete --state STATE [--queue Q] [--kind K] [--older-than AGE] [--yes]",
		Short: "Delete every job matching a filter (never a running one)",
		Long: `delete removes every job matching the filter, in any state but running: to
clear a flood of dead jobs without waiting for retention. Their attempt
rows stay until attempt retention removes them.` + bulkHelp,
		Example: `  leasehold jobs delete --state discarded --queue payments
  leasehold jobs delete --state completed,cancelled --older-than 72h --yes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBulk(cmd, g, o, leasehold.BulkDelete)
		},
	}
	addBulkFlags(cmd, o)
	return cmd
}
