package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/leasetype"
)

func newClientsCmd(g *globalOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "List the working clients: host, PID, ID, version, queues, running jobs, last seen",
		Long: `clients lists the fleet's working clients from the client registry
(table leasehold_client): every started client upserts its row every few
seconds (Config.RegistryInterval) and deletes it when it stops. A client
that stopped beating without stopping (crashed, or cut off from the
database) is listed as gone until a working client prunes its row, a lease
TTL later. RUNNING is the leases the client held at its last beat; times
are on the database clock.`,
		Example: `  leasehold clients
  leasehold clients --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withSession(cmd, openOptions{}, func(ctx context.Context, s *session) error {
				rows, err := s.client.Clients(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					if rows == nil {
						rows = []*leasetype.ClientRow{}
					}
					return writeJSON(cmd.OutOrStdout(), rows)
				}
				if len(rows) == 0 {
					fmt.Fprintln(cmd.ErrOrStderr(), "no clients registered: none is started (a client registers when it starts with workers)")
					return nil
				}
				now := s.now(ctx)
				t := newTable(cmd.OutOrStdout(), "HOST", "PID", "ID", "VERSION", "QUEUES", "RUNNING", "STARTED", "LAST SEEN", "STATUS")
				for _, r := range rows {
					status := "alive"
					if !r.Alive {
						status = "gone"
					}
					t.row(r.Host, r.PID, r.ID, orDash(r.Version), orDash(truncate(strings.Join(r.Queues, ","), 80)), r.Running,
						fmtTime(&r.StartedAt), fmtDuration(now.Sub(r.SeenAt))+" ago", status)
				}
				return t.flush()
			})
		},
	}
	addJSONFlag(cmd, &asJSON)
	return cmd
}
