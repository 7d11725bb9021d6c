package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// cliActor is who the CLI's operator actions are recorded as in the audit
// trail: "cli:$USER@hostname", from the environment, else the account.
func cliActor() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return "cli:" + name + "@" + host
}

// withCLIActor marks ctx with the CLI's actor (see cliActor).
func withCLIActor(ctx context.Context) context.Context {
	return leasehold.WithActor(ctx, cliActor())
}

// auditOptions are audit's flags.
type auditOptions struct {
	job, beforeID int64
	queue, actor  string
	limit         int
	json          bool
}

func newAuditCmd(g *globalOptions) *cobra.Command {
	o := &auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the operator actions: who retried, cancelled, discarded, resolved, paused what",
		Long: `audit lists the audit trail, newest first: every retry, cancel, discard,
resolution, queue pause and resume, and every batch of a bulk action, with
who took it (the dashboard's identity: token, basic:<user>, session; or
cli:<user>@<host> from this command line), when (database clock), which job
or queue, the note, and how many jobs it changed (0: refused).
Page backwards with --before-id set to the last ID shown.`,
		Example: `  leasehold audit
  leasehold audit --job 42
  leasehold audit --queue payments --limit 20 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.limit < 1 || o.limit > 10000 {
				return fmt.Errorf("--limit %d is outside 1 to 10000", o.limit)
			}
			if o.job < 0 || o.beforeID < 0 {
				return fmt.Errorf("--job and --before-id must be positive job and entry IDs")
			}
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rows, err := s.client.AuditList(ctx, &leasehold.AuditListParams{
					JobID: o.job, Queue: o.queue, Actor: o.actor, BeforeID: o.beforeID, Limit: o.limit + 1,
				})
				if err != nil {
					return err
				}
				more := len(rows) > o.limit
				if more {
					rows = rows[:o.limit]
				}
				if o.json {
					if rows == nil {
						rows = []*leasetype.AuditRow{}
					}
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				if len(rows) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no operator actions recorded")
					return nil
				}
				t := newTable(cmd.OutOrStdout(), "ID", "AT", "ACTOR", "ACTION", "QUEUE", "JOBS", "CHANGED", "NOTE")
				for _, r := range rows {
					t.row(r.ID, fmtTime(&r.At), r.Actor, r.Action, orDash(r.Queue), auditJobs(r), r.Count,
						orDash(truncate(joinNonEmpty("; ", r.Note, r.Detail), 100)))
				}
				if err := t.flush(); err != nil {
					return err
				}
				if more {
					fmt.Fprintf(cmd.ErrOrStderr(), "more entries exist: add --before-id %d\n", rows[len(rows)-1].ID)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.job, "job", 0, "only entries about this job (its own and the bulk batches that changed it)")
	f.StringVar(&o.queue, "queue", "", "only entries about this queue")
	f.StringVar(&o.actor, "actor", "", "only entries of this actor (cli:alice@host, token, basic:ops)")
	f.IntVar(&o.limit, "limit", 50, "most entries shown, 1 to 10000")
	f.Int64Var(&o.beforeID, "before-id", 0, "only entries with an ID below this (paging)")
	addJSONFlag(cmd, &o.json)
	return cmd
}

// auditJobs is the JOBS column: the job, or a bulk batch's count and first.
func auditJobs(r *leasetype.AuditRow) string {
	switch {
	case r.JobID > 0:
		return fmt.Sprint(r.JobID)
	case len(r.JobIDs) == 1:
		return fmt.Sprint(r.JobIDs[0])
	case len(r.JobIDs) > 1:
		return fmt.Sprintf("%d..%d (%d)", r.JobIDs[0], r.JobIDs[len(r.JobIDs)-1], len(r.JobIDs))
	}
	return "-"
}

func joinNonEmpty(sep string, parts ...string) string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}
