// Command bench measures leasehold against River and against a hand-written
// loop of raw SQL (the limit of a leased queue on the database), in one
// process, with alternating rounds, on the same database.
//
//	go run . drain       [-jobs 200000] [-rounds 3] [-backend postgres|mysql]
//	go run . continuous  [-duration 10s] [-rounds 3]
//	go run . latency     [-rate 100,1000] [-duration 10s] [-rounds 3] [-retained 0] [-notify-window 2ms] [-backend postgres|mysql|sqlite]
//	go run . heartbeat   [-jobs 10000] [-duration 40s] [-ttl 30s]
//	go run . sqlite      [-jobs 20000] [-rounds 3]
//	go run . payments    [-jobs 20000] [-rounds 1] [-pool 20] [-workers 100]
//	go run . keyclaim    [-jobs 1000000] [-keys 100000] [-claims 500]
//
// Postgres is LEASEHOLD_TEST_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable); each engine
// works in its own schema (bench_raw, bench_leasehold, bench_river).
//
// With -backend mysql, drain and latency run on MySQL/MariaDB at
// LEASEHOLD_TEST_MYSQL_URL (default root@tcp(127.0.0.1:3306)/test, a
// go-sql-driver DSN or a mysql:// URL), each engine in its own database
// (leasehold_bench_raw, leasehold_bench_leasehold), never the test database.
// River has no MySQL driver, so there the engines are raw and leasehold
// (drain, default 50,000 jobs) and leasehold-default and leasehold-remote
// (latency), and leasehold-xproc (latency: jobs inserted by a child process
// of this binary with a pool of its own, woken across processes by the
// driver's wake-up rows).
//
// With -backend sqlite, latency runs leasehold-default, leasehold-remote and
// leasehold-xproc on one database file in -sqlite-dir (default a temporary
// directory).
//
// Every mode prints one line per engine; see BENCHMARKS.md at the
// repository root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

func main() {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := runInsertChild(context.Background(), spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// options are the command's flags; zero values take the mode's defaults.
type options struct {
	mode         string
	jobs         int
	rounds       int
	duration     time.Duration
	rates        []int
	engines      []string
	workers      int
	ttl          time.Duration
	notifyWindow time.Duration
	retained     int
	cpuprofile   string
	memprofile   string
	sqliteDir    string
	dropIndexes  []string
	schemaPrefix string
	backend      string
	pool         int
	keys         int
	keyLimit     int
	claims       int
}

var modes = map[string]func(context.Context, *options, io.Writer) error{
	"drain":      runDrain,
	"continuous": runContinuous,
	"latency":    runLatency,
	"heartbeat":  runHeartbeat,
	"sqlite":     runSQLite,
	"payments":   runPayments,
	"keyclaim":   runKeyClaim,
}

const usage = "usage: go run . drain|continuous|latency|heartbeat|sqlite|payments|keyclaim [flags] (-h for the flags)"

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || modes[args[0]] == nil {
		return errors.New(usage)
	}
	o := &options{mode: args[0]}
	fs := flag.NewFlagSet(o.mode, flag.ContinueOnError)
	fs.IntVar(&o.jobs, "jobs", 0, "jobs per round (drain 200000, 50000 with -backend mysql; sqlite 20000, heartbeat 10000; latency: claims timed with -retained, 1000)")
	fs.IntVar(&o.rounds, "rounds", 0, "rounds per engine (3; heartbeat 1)")
	fs.DurationVar(&o.duration, "duration", 0, "measured time per round (continuous 10s, latency 10s, heartbeat 40s)")
	rates := fs.String("rate", "100,1000", "latency: enqueue rates in jobs/s, comma-separated")
	engines := fs.String("engines", "", "comma-separated engines (default per mode; see setup.go)")
	fs.IntVar(&o.keys, "keys", 0, "drain (postgres): also run leasehold-keys, the same drain with jobs over this many flow-control keys and KeyLimit -key-limit; keyclaim: the keys of the backlog (100000)")
	fs.IntVar(&o.keyLimit, "key-limit", 1, "drain -keys: the KeyLimit of leasehold-keys")
	fs.IntVar(&o.claims, "claims", 0, "keyclaim: keyed claims of up to 100 jobs timed (500)")
	fs.IntVar(&o.workers, "workers", 2000, "MaxWorkers of river and leasehold in drain, continuous and sqlite (River's bench uses 2000)")
	fs.DurationVar(&o.ttl, "ttl", 0, "heartbeat: lease TTL (leasehold default 30s)")
	fs.DurationVar(&o.notifyWindow, "notify-window", 0, "latency: postgres.Options.NotifyWindow of the leasehold engines but leasehold-nowindow (0: the driver's default, 2ms)")
	fs.IntVar(&o.retained, "retained", 0, "latency: also measure leasehold with this many finished jobs retained in its table")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run here; samples carry an engine label (go tool pprof -tagfocus engine=leasehold)")
	fs.StringVar(&o.memprofile, "memprofile", "", "write a heap profile at the end of the run here (go tool pprof -sample_index=alloc_space: what the run allocated)")
	fs.StringVar(&o.sqliteDir, "sqlite-dir", "", "sqlite: directory for the database files (default a temporary directory)")
	dropIndexes := fs.String("drop-index", "", "sqlite: comma-separated indexes of leasehold's schema to drop after migrating, to measure what their upkeep costs (an experiment: queries that need them get slower)")
	fs.StringVar(&o.schemaPrefix, "schema-prefix", "bench", "Postgres schemas are <prefix>_raw, <prefix>_leasehold and <prefix>_river; MySQL databases leasehold_<prefix>_raw and leasehold_<prefix>_leasehold")
	fs.StringVar(&o.backend, "backend", "postgres", "drain and latency: postgres, or mysql (MySQL/MariaDB at LEASEHOLD_TEST_MYSQL_URL; engines raw and leasehold, River has no MySQL driver); latency also sqlite")
	fs.IntVar(&o.pool, "pool", 0, "payments: connections in every engine's pool (20); leasehold also opens its 3 reserved connections (Config.ReservedConns)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if o.backend == "sqlite" && o.mode != "latency" {
		return fmt.Errorf("-backend sqlite: only the latency mode (the sqlite mode drains on SQLite)")
	}
	if o.backend != "postgres" && o.mode != "drain" && o.mode != "latency" {
		return fmt.Errorf("-backend %s: only the drain and latency modes run on another backend than postgres", o.backend)
	}
	for _, r := range strings.Split(*rates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(r))
		if err != nil || n < 1 {
			return fmt.Errorf("bad -rate %q", *rates)
		}
		o.rates = append(o.rates, n)
	}
	if *engines != "" {
		o.engines = strings.Split(*engines, ",")
	}
	if *dropIndexes != "" {
		if o.mode != "sqlite" {
			return fmt.Errorf("-drop-index: only the sqlite mode")
		}
		o.dropIndexes = strings.Split(*dropIndexes, ",")
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if err := modes[o.mode](ctx, o, out); err != nil {
		return err
	}
	if o.memprofile != "" {
		f, err := os.Create(o.memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		return pprof.Lookup("allocs").WriteTo(f, 0)
	}
	return nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// waitFor polls cond every millisecond until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// withLabel runs f with the engine's pprof label, which the goroutines the
// engine starts inherit.
func withLabel(ctx context.Context, engine string, f func(context.Context)) {
	pprof.Do(ctx, pprof.Labels("engine", engine), f)
}
