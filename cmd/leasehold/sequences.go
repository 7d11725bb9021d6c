package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
)

func newSequencesCmd(g *globalOptions) *cobra.Command {
	var (
		asJSON bool
		queue  string
		limit  int
	)
	cmd := &cobra.Command{
		Use:   "sequences",
		Short: "List blocked sequences: the job that holds each up, and how many wait behind it",
		Long: `sequences lists the sequences (InsertOpts.Sequence, WorkerOpts.SequenceBy)
held up by a job that will not run again by itself: the oldest job of the
sequence that is not completed is discarded, cancelled or stuck, and later
jobs wait. Under the default policy (SequenceBlock) they wait until an
operator retries that job (jobs retry ID) or deletes it; under
SequenceContinue only a stuck job holds them (resolve it with stuck).`,
		Example: `  leasehold sequences
  leasehold sequences --queue payments --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 || limit > 10000 {
				return fmt.Errorf("--limit %d is outside 1 to 10000", limit)
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rows, err := s.client.SequencesBlocked(ctx, &leasehold.SequencesBlockedParams{Queue: queue, Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					if rows == nil {
						rows = []*driver.SequenceBlockedRow{}
					}
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				if len(rows) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no blocked sequences")
					return nil
				}
				t := newTable(cmd.OutOrStdout(), "SEQUENCE", "JOB", "STATE", "QUEUE", "KIND", "WAITING", "LAST ERROR")
				for _, r := range rows {
					t.row(truncate(r.Sequence, 60), r.Job.ID, r.Job.State, r.Job.Queue, r.Job.Kind, r.Waiting, orDash(truncate(r.Job.LastError, 60)))
				}
				return t.flush()
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&queue, "queue", "", "only sequences whose blocking job is in this queue")
	f.IntVar(&limit, "limit", 100, "most sequences shown, 1 to 10000")
	addJSONFlag(cmd, &asJSON)
	return cmd
}
