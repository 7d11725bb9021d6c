package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// config is a harness run's settings, from the command line.
type config struct {
	backend     string        // sqlite or postgres
	pgURL       string        // the shared server's admin URL (a database is created per run)
	pgPrivate   bool          // run a throwaway cluster the harness may restart
	payments    int           // payments to create
	workers     int           // worker processes at once
	concurrency int           // charges per worker at once
	seed        int64         // the fault schedule and the PSP's behaviour
	duration    time.Duration // fault phase; payments are created over it
	faultEvery  time.Duration // pause between faults
	drain       time.Duration // bound on the drain phase after the faults
	ttl         time.Duration // charge lease TTL
	faults      []string      // fault kinds to inject; empty: every kind the backend allows
	json        bool          // print the report as one JSON object
	keep        bool          // keep the work directory (logs, SQLite file)
	verbose     bool          // log the harness's steps to stderr

	// A Patroni cluster from scripts/ha-cluster.sh (failover.go).
	haState   string        // its state file; empty: no HA cluster
	haRoute   string        // haproxy or multihost: how every client reaches the primary
	failovers int           // failovers to inject in the run
	freeze    time.Duration // replication freeze before the kill of failover_freeze
}

// Fault kinds.
const (
	faultKill      = "kill"
	faultPause     = "pause"
	faultDBRestart = "db_restart"
	faultLatency   = "net_latency"
	faultReset     = "net_reset"
	faultBlackhole = "net_blackhole"

	// Failovers of a Patroni cluster's primary (--ha-state).
	faultSwitchover  = "failover_switchover" // planned: patronictl switchover
	faultKillPrimary = "failover_kill"       // unplanned: SIGKILL of the primary's Patroni and Postgres
	faultFreeze      = "failover_freeze"     // replication frozen on the replicas, writes, then the kill
)

func isFailover(kind string) bool {
	return kind == faultSwitchover || kind == faultKillPrimary || kind == faultFreeze
}

func allFaults() []string {
	return []string{faultKill, faultPause, faultDBRestart, faultLatency, faultReset, faultBlackhole, faultSwitchover, faultKillPrimary, faultFreeze}
}

func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	c := &config{}
	defaultPG := os.Getenv("LEASEHOLD_TEST_POSTGRES_URL")
	if defaultPG == "" {
		defaultPG = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	var faults string
	fs.StringVar(&c.backend, "backend", "sqlite", "database: sqlite or postgres")
	fs.StringVar(&c.pgURL, "pg-url", defaultPG, "shared Postgres server to create the run's database on (never restarted)")
	fs.BoolVar(&c.pgPrivate, "pg-private", false, "run a private throwaway Postgres cluster (initdb) that the harness restarts in immediate mode")
	fs.IntVar(&c.payments, "payments", 500, "payments to create")
	fs.IntVar(&c.workers, "workers", 3, "worker processes")
	fs.IntVar(&c.concurrency, "concurrency", 8, "charges each worker runs at once")
	fs.Int64Var(&c.seed, "seed", 1, "seed of the fault schedule and the PSP's behaviour")
	fs.DurationVar(&c.duration, "duration", 40*time.Second, "fault phase; payments are created over its first 80%")
	fs.DurationVar(&c.faultEvery, "fault-every", 2*time.Second, "pause between two faults")
	fs.DurationVar(&c.drain, "drain", 60*time.Second, "bound on the drain phase after the faults")
	fs.DurationVar(&c.ttl, "ttl", 2*time.Second, "lease TTL of a charge")
	fs.StringVar(&faults, "faults", "", "comma-separated fault kinds (default: every kind the backend allows): "+strings.Join(allFaults(), ","))
	fs.BoolVar(&c.json, "json", false, "print the report as one JSON object")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (worker logs, SQLite file)")
	fs.BoolVar(&c.verbose, "v", false, "log the harness's steps to stderr")
	fs.StringVar(&c.haState, "ha-state", os.Getenv("LEASEHOLD_HA_STATE"), "state file (DIR/ha.env) of a Patroni cluster from scripts/ha-cluster.sh up: run against it and fail its primary over (env LEASEHOLD_HA_STATE)")
	fs.StringVar(&c.haRoute, "ha-route", "haproxy", "with --ha-state, how clients reach the primary: haproxy (its read-write port) or multihost (libpq hosts with target_session_attrs=read-write)")
	fs.IntVar(&c.failovers, "failovers", 1, "with --ha-state, failovers to inject (each after the cluster is whole again)")
	fs.DurationVar(&c.freeze, "freeze", 2*time.Second, "with failover_freeze, how long the replicas receive no WAL before the primary is killed")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case c.backend != "sqlite" && c.backend != "postgres":
		return nil, fmt.Errorf("--backend %q: want sqlite or postgres", c.backend)
	case c.payments < 1 || c.payments > 1_000_000:
		return nil, errors.New("--payments must be 1 to 1000000")
	case c.workers < 1 || c.workers > 32:
		return nil, errors.New("--workers must be 1 to 32")
	case c.concurrency < 1 || c.concurrency > 256:
		return nil, errors.New("--concurrency must be 1 to 256")
	case c.duration < time.Second || c.drain < time.Second || c.faultEvery < 0:
		return nil, errors.New("--duration and --drain must be at least 1s, --fault-every not negative")
	case c.ttl < 500*time.Millisecond || c.ttl > time.Minute:
		return nil, errors.New("--ttl must be 500ms to 1m")
	case c.pgPrivate && c.backend != "postgres":
		return nil, errors.New("--pg-private needs --backend postgres")
	case c.haState != "" && (c.backend != "postgres" || c.pgPrivate):
		return nil, errors.New("--ha-state needs --backend postgres and no --pg-private")
	case c.haRoute != "haproxy" && c.haRoute != "multihost":
		return nil, fmt.Errorf("--ha-route %q: want haproxy or multihost", c.haRoute)
	case c.failovers < 1 || c.failovers > 100:
		return nil, errors.New("--failovers must be 1 to 100")
	case c.freeze < 100*time.Millisecond || c.freeze > time.Minute:
		return nil, errors.New("--freeze must be 100ms to 1m")
	}
	allowed := map[string]bool{faultKill: true, faultPause: true}
	switch {
	case c.haState != "":
		// Clients reach the cluster through HAProxy or by libpq's host
		// list, not through a Toxiproxy per worker.
		allowed[faultSwitchover], allowed[faultKillPrimary], allowed[faultFreeze] = true, true, true
	case c.backend == "postgres":
		allowed[faultLatency], allowed[faultReset], allowed[faultBlackhole] = true, true, true
		allowed[faultDBRestart] = c.pgPrivate
	}
	if faults == "" && c.haState != "" {
		c.faults = []string{faultKillPrimary}
	} else if faults == "" {
		for _, f := range allFaults() {
			if allowed[f] {
				c.faults = append(c.faults, f)
			}
		}
	} else {
		for _, f := range strings.Split(faults, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			if !allowed[f] {
				if f == faultDBRestart && c.backend == "postgres" && c.haState == "" {
					return nil, errors.New("fault db_restart needs --pg-private: the shared server is never restarted")
				}
				if isFailover(f) && c.haState == "" {
					return nil, fmt.Errorf("fault %s needs --ha-state: a Patroni cluster from scripts/ha-cluster.sh", f)
				}
				return nil, fmt.Errorf("fault %q is unknown or not possible on %s (possible: %s)", f, c.backend, strings.Join(keys(allowed), ","))
			}
			c.faults = append(c.faults, f)
		}
	}
	return c, nil
}

func keys(m map[string]bool) []string {
	var out []string
	for _, f := range allFaults() {
		if m[f] {
			out = append(out, f)
		}
	}
	return out
}
