package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/migrate"
)

func newMigrateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, revert or list the schema migrations",
		Long: `migrate manages the leasehold tables in the database: each migration is a
numbered up/down SQL pair applied in its own transaction and recorded in a
bookkeeping table. The same files are in each backend's migrations folder for
teams with their own migration tool.`,
		Example: `  leasehold migrate up
  leasehold migrate status --database-url postgres://app@db:5432/app
  leasehold migrate down --to 1`,
	}
	cmd.AddCommand(newMigrateUpCmd(g), newMigrateDownCmd(g), newMigrateStatusCmd(g))
	return cmd
}

func newMigrateUpCmd(g *globalOptions) *cobra.Command {
	var to int
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (or those up to --to)",
		Long: `up applies the migrations not yet applied, oldest first, each in its own
transaction. On SQLite it creates the database file when it does not exist.`,
		Example: `  leasehold migrate up
  leasehold migrate up --to 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{create: true}, func(ctx context.Context, s *session) error {
				target := s.migrator.Latest()
				if cmd.Flags().Changed("to") {
					target = to
				}
				done, err := s.migrator.UpTo(ctx, target)
				report(cmd, "applied", done)
				return migrateErr(err, to)
			})
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "apply migrations up to and including this version (default: the latest)")
	return cmd
}

func newMigrateDownCmd(g *globalOptions) *cobra.Command {
	var to int
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Revert the latest applied migration (or every one above --to)",
		Long: `down reverts the most recently applied migration. With --to N it reverts,
newest first, every applied migration above version N; --to 0 removes the
whole leasehold schema, jobs included.`,
		Example: `  leasehold migrate down
  leasehold migrate down --to 0   # drop every leasehold table`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				var done []int
				var err error
				if cmd.Flags().Changed("to") {
					if to < 0 {
						return fmt.Errorf("--to %d: a version is 0 or more", to)
					}
					done, err = s.migrator.DownTo(ctx, to)
				} else {
					done, err = s.migrator.Down(ctx)
				}
				report(cmd, "reverted", done)
				return migrateErr(err, to)
			})
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "revert every applied migration above this version (0: all)")
	return cmd
}

func report(cmd *cobra.Command, verb string, done []int) {
	out := cmd.OutOrStdout()
	if len(done) == 0 {
		fmt.Fprintf(out, "nothing to do: no migration %s\n", verb)
		return
	}
	for _, v := range done {
		fmt.Fprintf(out, "%s migration %d\n", verb, v)
	}
}

func migrateErr(err error, to int) error {
	if errors.Is(err, migrate.ErrUnknownVersion) {
		return fmt.Errorf("--to %d: no migration has that version (see leasehold migrate status)", to)
	}
	return err
}

// migrationJSON is one row of migrate status --json.
type migrationJSON struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Applied bool   `json:"applied"`
}

func newMigrateStatusCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether each is applied",
		Example: `  leasehold migrate status
  leasehold migrate status --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				st, err := s.migrator.Status(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					out := make([]migrationJSON, 0, len(st))
					for _, m := range st {
						out = append(out, migrationJSON(m))
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				t := newTable(cmd.OutOrStdout(), "VERSION", "NAME", "STATUS")
				for _, m := range st {
					status := "pending"
					if m.Applied {
						status = "applied"
					}
					t.row(m.Version, m.Name, status)
				}
				if err := t.flush(); err != nil {
					return err
				}
				pending := slices.ContainsFunc(st, func(m migrate.Status) bool { return !m.Applied })
				if pending {
					fmt.Fprintln(cmd.ErrOrStderr(), "some migrations are pending: run leasehold migrate up")
				}
				return nil
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}
