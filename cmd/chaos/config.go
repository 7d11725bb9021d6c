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
}

// Fault kinds.
const (
	faultKill      = "kill"
	faultPause     = "pause"
	faultDBRestart = "db_restart"
	faultLatency   = "net_latency"
	faultReset     = "net_reset"
	faultBlackhole = "net_blackhole"
)

func allFaults() []string {
	return []string{faultKill, faultPause, faultDBRestart, faultLatency, faultReset, faultBlackhole}
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
	}
	allowed := map[string]bool{faultKill: true, faultPause: true}
	if c.backend == "postgres" {
		allowed[faultLatency], allowed[faultReset], allowed[faultBlackhole] = true, true, true
		allowed[faultDBRestart] = c.pgPrivate
	}
	if faults == "" {
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
				if f == faultDBRestart && c.backend == "postgres" {
					return nil, errors.New("fault db_restart needs --pg-private: the shared server is never restarted")
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
