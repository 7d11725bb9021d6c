package leasehold

import (
	"context"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// memExec claims made-up running jobs and accepts every renewal and
// outcome at once: with it the client's own work per job is all there is.
type memExec struct {
	driver.Executor // the SQLite executor, for anything else
	lastID          atomic.Int64
}

func (e *memExec) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	now := time.Now()
	until := now.Add(p.DefaultLeaseTTL)
	rows := make([]leasetype.JobRow, p.Max)
	out := make([]*leasetype.JobRow, p.Max)
	for i := range rows {
		rows[i] = leasetype.JobRow{
			ID: e.lastID.Add(1), Kind: "noop", Queue: p.Queue, State: leasetype.JobStateRunning, Priority: 1,
			EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), Attempt: 1, MaxAttempts: 25,
			LeaseToken: 1, LeaseOwner: p.Owner, LeasedAt: &now, LeaseUntil: &until,
			ExpiryPolicy: leasetype.ExpiryRetry, ScheduledAt: now, CreatedAt: now,
		}
		out[i] = &rows[i]
	}
	return out, nil
}

func (e *memExec) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	ids := make([]int64, len(p.Items))
	for i, it := range p.Items {
		ids[i] = it.ID
	}
	return ids, nil
}

func (e *memExec) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	ids := make([]int64, len(p.Leases))
	for i, r := range p.Leases {
		ids[i] = r.ID
	}
	return ids, nil
}

// processCPU is the CPU time the process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkJobPath is the client's CPU per job on a busy queue: claims of
// 1,000 no-op jobs from a database that costs nothing, each job run on the
// producer's handler goroutines and its completion written in batches,
// with the heartbeater running. One op is one job; cpu-ns/op is the
// process's CPU time per job, on every core.
func BenchmarkJobPath(b *testing.B) {
	const batch = 1000
	w := NewWorkers()
	AddWorker(w, WorkFunc[noopArgs](func(context.Context, *Job[noopArgs]) error { return nil }))
	c, err := NewClient(newTestSQLite(b), &Config{Workers: w, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	exec := &memExec{Executor: c.core.exec}
	c.core.exec, c.core.leaseExec, c.core.completer.exec = exec, exec, exec
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// As Start sets it: a parent that is never cancelled, so a handler's
	// context does not register with it.
	c.core.handlerBase = context.WithValue(context.Background(), coreContextKey{}, c)
	hb := &heartbeater{exec: exec, leases: c.core.leases, writeMu: c.core.completer.writeMu, logger: c.core.logger, stats: &c.core.stats}
	go hb.run(ctx)
	go c.core.completer.run(ctx)
	p := newProducer(defaultQueue, batch, nil)
	p.handlers.open()
	defer p.handlers.close()

	b.ReportAllocs()
	cpu0 := processCPU()
	for done := 0; done < b.N; done += batch {
		if err := c.core.claimAndStart(ctx, p, min(batch, b.N-done)); err != nil {
			b.Fatal(err)
		}
		c.core.leases.wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if got := c.Stats().Completed; got != int64(b.N) {
		b.Fatalf("completed %d jobs, want %d", got, b.N)
	}
}
