// Command leasehold is Leasehold's command line: `leasehold demo` runs the
// payments reference system under injected faults; the operator subcommands
// (migrate, jobs, stuck, queues, stats, serve) share its --database-url.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
