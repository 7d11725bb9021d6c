package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
)

func newKeysCmd(g *globalOptions) *cobra.Command {
	var (
		asJSON bool
		queue  string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "List the flow-control keys with the most waiting jobs, with their running jobs",
		Long: `keys lists the flow-control keys (InsertOpts.Key, WorkerOpts.KeyBy) of
unfinished jobs: the keys with the most waiting jobs (available, scheduled or
retryable), each with its running jobs, then per queue how many distinct keys
have waiting jobs and the most waiting jobs of one key. A key at its KeyLimit
shows as many running jobs as the limit; a long wait behind one key with the
others empty is what fairness (QueueConfig.Fair) is for.`,
		Example: `  leasehold keys
  leasehold keys --queue payments --limit 50 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return fmt.Errorf("--limit %d is outside 1 to 10000", limit)
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				res, err := s.client.KeyStats(ctx, &leasehold.KeyStatsParams{Queue: queue, Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), res)
				}
				if len(res.Top) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no keyed jobs waiting or running")
					return nil
				}
				t := newTable(cmd.OutOrStdout(), "QUEUE", "KEY", "WAITING", "RUNNING")
				for _, r := range res.Top {
					t.row(r.Queue, truncate(r.Key, 60), r.Waiting, r.Running)
				}
				if err := t.flush(); err != nil {
					return err
				}
				if len(res.Queues) == 0 {
					return nil
				}
				fmt.Fprintln(cmd.OutOrStdout())
				t = newTable(cmd.OutOrStdout(), "QUEUE", "KEYS WAITING", "JOBS WAITING", "MOST OF ONE KEY")
				for _, q := range res.Queues {
					t.row(q.Queue, q.Keys, q.Waiting, q.MaxWaiting)
				}
				return t.flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "only keys of jobs in this queue")
	f.IntVar(&limit, "limit", 20, "most keys shown, 1 to 10000")
	addJSONFlag(cmd, &asJSON)
	return cmd
}
