// Command leasehold is Leasehold's command line: `leasehold demo` runs the
// payments reference system under injected faults; the operator subcommands
// (migrate, jobs, stuck, queues, stats, serve) share its --database-url.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root := newRootCmd()
	root.SilenceErrors = true // printed here, made safe for the terminal
	err := root.ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", termSafe(err.Error()))
		os.Exit(1)
	}
}
