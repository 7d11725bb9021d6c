// Command chaos runs the payments reference system (examples/payments) with
// worker OS processes against a real database and injects faults on a
// schedule drawn from --seed: SIGKILL of a worker then a restart, SIGSTOP of
// a worker past its lease TTL then SIGCONT, an immediate-mode Postgres
// restart (only on a private cluster the harness owns, --pg-private), and
// network faults between one worker and Postgres through an in-process
// Toxiproxy (latency above the TTL, a reset right after the server's reply,
// a blackhole). At the end a checker reads the database and the PSP
// simulator's ledger and reports what was lost or doubled; it exits non-zero
// when anything was, or when a job is not terminal after the drain phase.
//
//	chaos --backend sqlite --payments 600 --workers 3 --duration 40s --json
//	chaos --backend postgres --pg-private --payments 1000 --workers 4 --json
//
// Against a Patroni cluster from scripts/ha-cluster.sh (--ha-state
// DIR/ha.env), the faults are failovers of its primary instead
// (failover.go): a planned patronictl switchover, a SIGKILL of the
// primary's Patroni and Postgres, or a replication freeze on the replicas
// followed by that kill. Clients reach the primary through HAProxy or
// libpq's host list (--ha-route); the report adds the write outage, the
// acknowledged payments the failover lost (allowed with async replication
// only, listed by ID), and the fencing tokens granted twice, from claim logs
// the workers keep outside the database (claimlog.go).
//
//	chaos --backend postgres --ha-state /tmp/leasehold-ha-25432/ha.env --faults failover_kill --json
//
// The harness re-executes its own binary as `chaos worker ...` for every
// worker; each worker reports its Client.Stats() as JSON lines on stdout.
// Everything listens on loopback only, and every child process (and the
// private cluster) is stopped when the harness exits or is interrupted.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		if err := runWorker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "chaos worker:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, cfg)
	stop()
	os.Exit(code)
}
