package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// defaultPostgresURL is used when LEASEHOLD_TEST_POSTGRES_URL is unset.
const defaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

func postgresURL() string {
	if u := os.Getenv("LEASEHOLD_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultPostgresURL
}

// openPool opens a pool whose connections resolve tables in schema (created
// when missing) and name themselves app in pg_stat_activity.
func openPool(ctx context.Context, url, schema, app string) (*pgxpool.Pool, error) {
	admin, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	_, err = admin.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+schema)
	admin.Close()
	if err != nil {
		return nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return pool, nil
}

// dbServer names the database server whose CPU the throughput lines count:
// every process on this machine with one of procs as its command name.
type dbServer struct {
	label string   // in the CPU/job column; "" prints no server column
	procs []string // command names in /proc/<pid>/stat
}

var (
	pgServer    = dbServer{label: "postgres", procs: []string{"postgres"}}
	mysqlServer = dbServer{label: "mariadbd", procs: []string{"mariadbd", "mysqld"}}
	noServer    = dbServer{} // an embedded database: its CPU is the bench process's
)

// usage is a snapshot of the resources a round consumes.
type resUsage struct {
	at       time.Time
	goCPU    time.Duration         // this process, user+system
	pgCPU    map[int]time.Duration // per database server process on this machine
	pgFaults map[int]int64         // minor page faults, per database server process
}

// takeUsage snapshots this process's CPU and that of the server's processes
// (Postgres: one per connection; MariaDB: one for all).
func takeUsage(server dbServer) resUsage {
	cpu, faults := serverUsageByPID(nil, server.procs)
	return resUsage{at: time.Now(), goCPU: processCPU(), pgCPU: cpu, pgFaults: faults}
}

// pgCPUSince is the database server CPU used between u0 and u: for each
// process alive at u, its CPU minus what it had at u0 (all of it when it
// started since). Processes that exited in between are not counted.
func (u resUsage) pgCPUSince(u0 resUsage) time.Duration {
	var d time.Duration
	for pid, t := range u.pgCPU {
		d += max(t-u0.pgCPU[pid], 0)
	}
	return d
}

// pgFaultsSince is pgCPUSince for the server's minor page faults: a fault
// is the kernel mapping a page the process touched for the first time,
// as after its allocator returned memory to the kernel and took it back.
func (u resUsage) pgFaultsSince(u0 resUsage) int64 {
	var n int64
	for pid, f := range u.pgFaults {
		n += max(f-u0.pgFaults[pid], 0)
	}
	return n
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat (USER_HZ,
// 100 on Linux).
const clockTick = 10 * time.Millisecond

// postgresCPU sums the user and system CPU of the postgres processes on
// this machine: all of them when pids is nil, else those listed. Processes
// that exited during a measurement are not counted, which is why the pools
// here keep their connections for the whole run.
func postgresCPU(pids []int) time.Duration {
	var total time.Duration
	for _, t := range postgresCPUByPID(pids) {
		total += t
	}
	return total
}

// postgresCPUByPID is postgresCPU per process.
func postgresCPUByPID(pids []int) map[int]time.Duration {
	return serverCPUByPID(pids, pgServer.procs)
}

// serverCPUByPID is the CPU of each process named one of names: all of them
// when pids is nil, else those listed.
func serverCPUByPID(pids []int, names []string) map[int]time.Duration {
	cpu, _ := serverUsageByPID(pids, names)
	return cpu
}

// serverUsageByPID is serverCPUByPID with each process's minor page faults.
func serverUsageByPID(pids []int, names []string) (map[int]time.Duration, map[int]int64) {
	out, faults := map[int]time.Duration{}, map[int]int64{}
	if len(names) == 0 {
		return out, faults
	}
	if pids == nil {
		matches, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, m := range matches {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(m))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || !slices.Contains(names, s[open+1:end]) {
			continue
		}
		// Fields after the command: state is field 3; minflt is 10; utime
		// and stime are 14 and 15.
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(ut+st) * clockTick
		faults[pid], _ = strconv.ParseInt(f[7], 10, 64)
	}
	return out, faults
}

// resetPeakRSS frees what it can and resets the kernel's peak-RSS mark
// (VmHWM), so that the next peakRSS reads the peak of one round only.
func resetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS returns VmHWM in bytes, or getrusage's maxrss where /proc is missing.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				return kb << 10
			}
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Maxrss << 10
}
