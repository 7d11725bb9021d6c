package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

// defaultDatabaseURL is used when neither --database-url nor
// LEASEHOLD_DATABASE_URL is set.
const defaultDatabaseURL = "sqlite:leasehold.db"

// databaseURLEnv is the environment variable that sets the database URL.
const databaseURLEnv = "LEASEHOLD_DATABASE_URL"

// globalOptions are the flags every subcommand shares.
type globalOptions struct {
	databaseURL string
}

// databaseURL returns the database URL to use and whether the user chose it
// (by flag or environment) rather than taking the default.
func (g *globalOptions) resolveURL(cmd *cobra.Command) (string, bool) {
	if f := cmd.Flags().Lookup("database-url"); f != nil && f.Changed {
		return g.databaseURL, true
	}
	if v := os.Getenv(databaseURLEnv); v != "" {
		return v, true
	}
	return defaultDatabaseURL, false
}

// newRootCmd builds the command tree. Each subcommand lives in its own file
// and is added here.
func newRootCmd() *cobra.Command {
	g := &globalOptions{}
	root := &cobra.Command{
		Use:   "leasehold",
		Short: "Leasehold: a Go job queue in your SQL database, with leases and fencing tokens",
		Long: `Leasehold keeps jobs in your application's own SQL database (Postgres,
MySQL/MariaDB or SQLite) and gives each to one worker at a time through a lease
with a fencing token.

Start with the demo, which runs the payments reference system under injected
faults and checks that no payment is lost or charged twice:

  leasehold demo`,
		SilenceUsage: true,
	}
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", defaultDatabaseURL,
		"database URL: postgres://..., postgresql://..., mysql://... or sqlite:FILE (env "+databaseURLEnv+")")
	root.AddCommand(newDemoCmd(g), newVersionCmd(),
		newMigrateCmd(g), newEnqueueCmd(g), newJobsCmd(g), newStuckCmd(g), newQueuesCmd(g), newPeriodicCmd(g), newStatsCmd(g), newServeCmd(g), newAuditCmd(g), newClientsCmd(g), newSequencesCmd(g), newKeysCmd(g))
	refuseTypos(root)
	return root
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
