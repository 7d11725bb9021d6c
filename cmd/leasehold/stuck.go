package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

func newStuckCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stuck",
		Short: "List and resolve stuck jobs awaiting reconciliation",
		Long: `A job is stuck when its lease expired under the "stuck" expiry policy: the
worker may have had an outside effect (a payment charge) before it vanished,
so the job is not retried blindly. Check the outside system, then resolve the
job as succeeded (the work happened), failed (it did not and must not) or
retry (it did not and may run again).`,
		Example: `  leasehold stuck list
  leasehold stuck resolve 42 --as succeeded --note "PSP shows charge ch_123"`,
	}
	cmd.AddCommand(newStuckListCmd(g), newStuckResolveCmd(g))
	return cmd
}

func newStuckListCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	var queue string
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the stuck jobs, newest first",
		Example: `  leasehold stuck list
  leasehold stuck list --queue payments --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return fmt.Errorf("--limit %d is outside 1 to 10000", limit)
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rows, err := s.client.JobList(ctx, &leasehold.JobListParams{
					States: []leasetype.JobState{leasetype.JobStateStuck}, Queue: queue, Limit: limit,
				})
				if err != nil {
					return err
				}
				return printJobs(cmd, rows, asJSON, "no stuck jobs", s.now(ctx))
			})
		},
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only stuck jobs of this queue")
	cmd.Flags().IntVar(&limit, "limit", 100, "most jobs shown, 1 to 10000")
	addJSONFlag(cmd, &asJSON)
	return cmd
}

func newStuckResolveCmd(g *globalOptions) *cobra.Command {
	var as, note string
	cmd := &cobra.Command{
		Use:   "resolve ID --as succeeded|failed|retry",
		Short: "Settle a stuck job after checking the outside system",
		Long: `resolve settles a stuck job:

  --as succeeded  the work happened: the job becomes completed
  --as failed     the work did not happen and must not: the job is discarded
  --as retry      the work did not happen and may: the job is available again

--note says why; it is kept as the job's last error for the record.`,
		Example: `  leasehold stuck resolve 42 --as succeeded --note "PSP shows charge ch_123"
  leasehold stuck resolve 43 --as retry`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			res := leasehold.Resolution(strings.ToLower(as))
			switch res {
			case leasehold.ResolveSucceeded, leasehold.ResolveFailed, leasehold.ResolveRetry:
			case "":
				return fmt.Errorf("--as is required: succeeded, failed or retry")
			default:
				return fmt.Errorf("--as %q is not a resolution (want succeeded, failed or retry)", as)
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				row, err := s.client.ResolveStuck(ctx, id, res, note)
				if err != nil {
					return jobErr("resolve", id, row, err, "only stuck jobs can be resolved")
				}
				fmt.Fprintf(cmd.OutOrStdout(), "resolved job %d as %s: now %s\n", id, res, row.State)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&as, "as", "", "resolution: succeeded, failed or retry (required)")
	cmd.Flags().StringVar(&note, "note", "", "why, kept as the job's last error")
	return cmd
}
