package mysql

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// BenchmarkLeaseCycle is the driver's side of a drain on one reserved
// connection: claims of 500 jobs inserted beforehand, and their
// completions in one finish. One op is one job; cpu-ns/op is this
// process's CPU per job (the client's: decoding rows, encoding
// statements), which the server's time does not enter; server-ns/op is the
// CPU of the whole server process per job (all its threads, purge and
// page flushing included, from /proc), reported when the server runs on
// this machine: the way to rank a statement change below the drain's
// noise. Reproduce with
//
//	go test -run '^$' -bench LeaseCycle -benchtime 20000x ./mysql
func BenchmarkLeaseCycle(b *testing.B) {
	const batch = 500
	ctx := b.Context()
	d := newTestDriver(b)
	r, err := d.OpenReserved(ctx, &driver.OpenReservedParams{Conns: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	args := []byte(`{"customer_id":1234567,"amount_cents":4200,"currency":"EUR","note":"a typical small payload"}`)
	for done := 0; done < b.N; done += 10 * batch {
		jobs := make([]*driver.JobInsertParams, min(10*batch, b.N-done))
		for i := range jobs {
			jobs[i] = &driver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1, EncodedArgs: args, Metadata: []byte(`{}`), MaxAttempts: 25}
		}
		if _, err := r.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: jobs}); err != nil {
			b.Fatal(err)
		}
	}
	claim := &driver.JobClaimParams{Queue: "q", Max: batch, Owner: "bench", DefaultLeaseTTL: time.Minute}
	items := make([]*driver.JobFinish, 0, batch)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchProcessCPU()
	server0, serverOK := serverCPU(ctx, d)
	for done := 0; done < b.N; {
		claim.Max = min(batch, b.N-done)
		rows, err := r.JobClaim(ctx, claim)
		if err != nil || len(rows) != claim.Max {
			b.Fatalf("claim: %d jobs, %v; want %d", len(rows), err, claim.Max)
		}
		items = items[:0]
		for _, j := range rows {
			items = append(items, &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted})
		}
		written, err := r.JobFinish(ctx, &driver.JobFinishParams{Owner: "bench", Items: items})
		if err != nil || len(written) != len(items) {
			b.Fatalf("finish: %d jobs, %v; want %d", len(written), err, len(items))
		}
		done += len(rows)
	}
	b.StopTimer()
	b.ReportMetric(float64(benchProcessCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if server1, ok := serverCPU(ctx, d); ok && serverOK {
		b.ReportMetric(float64(server1-server0)/float64(b.N), "server-ns/op")
	}
}

// serverCPU is the CPU time, user and system, of every thread of the
// server process d talks to, found by the pid file it names, or false
// where that cannot be read (a server on another machine or in a
// container). /proc/PID/stat counts in clock ticks (100 a second here),
// so a run needs a few seconds of server time for a figure to mean
// anything.
func serverCPU(ctx context.Context, d *Driver) (time.Duration, bool) {
	var pidFile string
	if err := d.DB().QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err != nil {
		return 0, false
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	stat, err := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after its closing one. utime and stime are fields 14 and 15.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * (time.Second / 100), true
}

// benchProcessCPU is the CPU time the process has used, user and system.
func benchProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
