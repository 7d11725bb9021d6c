package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
)

// jobTableVersion is the migration that creates leasehold_job (and
// leasehold_attempt) on every backend: reverting it drops the jobs.
const jobTableVersion = 1

func newMigrateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, revert or list the schema migrations",
		Long: `migrate manages the leasehold tables in the database: each migration is a
numbered up/down SQL pair, recorded in a bookkeeping table. The same files
are in each backend's migrations folder for teams with their own migration
tool.

up and down take the database's migration lock first (an advisory lock on
Postgres, GET_LOCK on MySQL and MariaDB, the write lock on SQLite), so every
replica of a deploy may run "migrate up" at once: one applies the
migrations, the others wait for it, find nothing left to do and exit 0. On
Postgres the lock is transaction-scoped and works through PgBouncer in
transaction mode.`,
		Example: `  leasehold migrate up
  leasehold migrate status --database-url postgres://app@db:5432/app
  leasehold migrate down --to 1`,
	}
	cmd.AddCommand(newMigrateUpCmd(g), newMigrateDownCmd(g), newMigrateStatusCmd(g))
	return cmd
}

// addLockTimeoutFlag adds --lock-timeout to a command that migrates.
func addLockTimeoutFlag(cmd *cobra.Command, cfg *migrate.Config) {
	cmd.Flags().DurationVar(&cfg.LockTimeout, "lock-timeout", driver.DefaultMigrationLockTimeout,
		"how long to wait for another process's migration to finish before giving up")
}

// checkTarget returns the error for a --to that names no known migration, so
// that it is the one line printed.
func checkTarget(m migrator, to int) error {
	if to < 0 {
		return fmt.Errorf("--to %d: a version is 0 or more", to)
	}
	if to != 0 && !m.Known(to) {
		return fmt.Errorf("--to %d: no migration has that version (this binary knows 1 to %d; see leasehold migrate status)", to, m.Latest())
	}
	return nil
}

func newMigrateUpCmd(g *globalOptions) *cobra.Command {
	var to int
	var cfg migrate.Config
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration (or those up to --to)",
		Long: `up applies the migrations not yet applied, oldest first, under the
database's migration lock. When another process holds the lock, up waits for
it (at most --lock-timeout), then applies what is still pending: usually
nothing, and it prints "nothing to do". On Postgres and SQLite the run is one
transaction; on MySQL each migration commits as it runs. On SQLite it creates
the database file when it does not exist.`,
		Example: `  leasehold migrate up
  leasehold migrate up --to 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{create: true, migrate: &cfg}, func(ctx context.Context, s *session) error {
				target := s.migrator.Latest()
				if cmd.Flags().Changed("to") {
					if err := checkTarget(s.migrator, to); err != nil {
						return err
					}
					target = to
				}
				done, err := s.migrator.UpTo(ctx, target)
				report(cmd, "applied", done, err)
				return migrateErr(err)
			})
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "apply migrations up to and including this version (default: the latest)")
	addLockTimeoutFlag(cmd, &cfg)
	return cmd
}

func newMigrateDownCmd(g *globalOptions) *cobra.Command {
	var to int
	var yes bool
	var cfg migrate.Config
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Revert the latest applied migration (or every one above --to)",
		Long: `down reverts the most recently applied migration. With --to N it reverts,
newest first, every applied migration above version N; --to 0 removes the
whole leasehold schema. Reverting migration 1 drops the job and attempt
tables: when they hold jobs, down refuses unless --yes is given, and says
how many jobs would go. It takes the same lock as up.`,
		Example: `  leasehold migrate down
  leasehold migrate down --to 0 --yes   # drop every leasehold table, jobs included`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{migrate: &cfg}, func(ctx context.Context, s *session) error {
				toSet := cmd.Flags().Changed("to")
				if toSet {
					if err := checkTarget(s.migrator, to); err != nil {
						return err
					}
				}
				if !yes {
					if err := refuseDroppingJobs(ctx, s, toSet, to); err != nil {
						return err
					}
				}
				var done []int
				var err error
				if toSet {
					done, err = s.migrator.DownTo(ctx, to)
				} else {
					done, err = s.migrator.Down(ctx)
				}
				report(cmd, "reverted", done, err)
				return migrateErr(err)
			})
		},
	}
	cmd.Flags().IntVar(&to, "to", 0, "revert every applied migration above this version (0: all)")
	cmd.Flags().BoolVar(&yes, "yes", false, "drop the job tables even when they hold jobs")
	addLockTimeoutFlag(cmd, &cfg)
	return cmd
}

// refuseDroppingJobs returns an error when the down run would revert the
// migration that creates the job table while it holds jobs. The count is
// read before the run takes its lock: it guards against a mistake, not
// against a concurrent insert.
func refuseDroppingJobs(ctx context.Context, s *session, toSet bool, to int) error {
	st, err := s.migrator.Status(ctx)
	if err != nil {
		return err
	}
	var applied []int
	for _, m := range st {
		if m.Applied && !m.Unknown {
			applied = append(applied, m.Version)
		}
	}
	if !slices.Contains(applied, jobTableVersion) {
		return nil
	}
	drops := toSet && to < jobTableVersion ||
		!toSet && applied[len(applied)-1] == jobTableVersion
	if !drops {
		return nil
	}
	counts, err := s.client.JobCounts(ctx)
	if err != nil {
		return fmt.Errorf("count the jobs that down would drop: %w", err)
	}
	var jobs int64
	for _, c := range counts {
		jobs += c.Count
	}
	if jobs > 0 {
		return fmt.Errorf("refusing to drop leasehold_job with %s jobs: pass --yes", groupDigits(jobs))
	}
	return nil
}

// groupDigits writes n with a comma between groups of three digits.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// report prints what a run changed. After an error it prints only what was
// kept, so the error stays the run's last word.
func report(cmd *cobra.Command, verb string, done []int, err error) {
	out := cmd.OutOrStdout()
	if len(done) == 0 && err == nil {
		fmt.Fprintf(out, "nothing to do: no migration %s\n", verb)
		return
	}
	for _, v := range done {
		fmt.Fprintf(out, "%s migration %d\n", verb, v)
	}
}

func migrateErr(err error) error {
	if errors.Is(err, driver.ErrMigrationLockTimeout) {
		return fmt.Errorf("%w (raise --lock-timeout to wait longer)", err)
	}
	return err
}

// lockHolder describes who holds the migration lock, "" when it is free or
// the backend cannot tell (SQLite).
func lockHolder(ctx context.Context, s *session) (string, error) {
	var d any
	switch {
	case s.db.Postgres != nil:
		d = s.db.Postgres
	case s.db.MySQL != nil:
		d = s.db.MySQL
	}
	if in, ok := d.(driver.MigrationLockInspector); ok {
		return in.MigrationLockHolder(ctx)
	}
	return "", nil
}

// migrationJSON is one row of migrate status --json.
type migrationJSON struct {
	Version        int    `json:"version"`
	Name           string `json:"name"`
	Applied        bool   `json:"applied"`
	Unknown        bool   `json:"unknown,omitempty"`
	CompatibleWith int    `json:"compatible_with,omitempty"`
}

func newMigrateStatusCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether each is applied",
		Long: `status lists this binary's migrations and whether each is applied, and any
migration the database records that this binary does not know (a newer
binary applied it). COMPATIBLE shows a migration's declaration: "3+" means
binaries that know version 3 or later keep working with it applied. On
Postgres and MySQL it also says who holds the migration lock, when a
migration is running. status changes nothing in the database.`,
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
				t := newTable(cmd.OutOrStdout(), "VERSION", "NAME", "STATUS", "COMPATIBLE")
				for _, m := range st {
					status := "pending"
					switch {
					case m.Unknown:
						status = "applied, unknown to this binary"
					case m.Applied:
						status = "applied"
					}
					compatible := "-"
					if m.CompatibleWith > 0 {
						compatible = fmt.Sprintf("%d+", m.CompatibleWith)
					}
					t.row(m.Version, m.Name, status, compatible)
				}
				if err := t.flush(); err != nil {
					return err
				}
				if slices.ContainsFunc(st, func(m migrate.Status) bool { return !m.Applied }) {
					fmt.Fprintln(cmd.ErrOrStderr(), "some migrations are pending: run leasehold migrate up")
				}
				if holder, err := lockHolder(ctx, s); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "cannot tell who holds the migration lock: %v\n", err)
				} else if holder != "" {
					fmt.Fprintf(cmd.ErrOrStderr(), "a migration is running: the migration lock is held by %s\n", holder)
				}
				if slices.ContainsFunc(st, func(m migrate.Status) bool { return m.Unknown }) {
					fmt.Fprintln(cmd.ErrOrStderr(), "the schema is newer than this binary: see doc \"Upgrading\" before running old workers on it")
				}
				return nil
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}
