package leasehold

import (
	"context"
	"database/sql"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// The benchmarks of stages and dependencies run on SQLite in a temporary
// file; bench/ measures the backends under load. Reproduce with
//
//	go test -run '^$' -bench 'Checkpoint|FanIn' -benchtime 1x .
//
// (BenchmarkCheckpointWrite takes a normal -benchtime).

// benchArgs is a job of these benchmarks; Checkpoint says whether its
// handler records one stage.
type benchArgs struct {
	Checkpoint bool `json:"checkpoint,omitempty"`
}

func (benchArgs) Kind() string { return "bench" }

// BenchmarkCheckpointWrite is one checkpoint from a handler: one op is one
// Checkpoint call of a small state on the job the handler holds.
func BenchmarkCheckpointWrite(b *testing.B) {
	done := make(chan error, 1)
	w := NewWorkers()
	AddWorker(w, WorkFunc[benchArgs](func(ctx context.Context, _ *Job[benchArgs]) error {
		b.ResetTimer()
		for i := range b.N {
			if err := Checkpoint(ctx, "step", map[string]int{"i": i}); err != nil {
				done <- err
				return err
			}
		}
		b.StopTimer()
		done <- nil
		return nil
	}))
	c := benchClient(b, w, 1)
	if _, err := c.Insert(context.Background(), benchArgs{}, nil); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkDrainCheckpoint drains 2,000 jobs inserted beforehand, without
// a checkpoint and with one per job; one op is one job.
func BenchmarkDrainCheckpoint(b *testing.B) {
	for _, tc := range []struct {
		name       string
		checkpoint bool
	}{{"none", false}, {"one-per-job", true}} {
		b.Run(tc.name, func(b *testing.B) {
			const jobs = 2000
			var ran atomic.Int64
			w := NewWorkers()
			AddWorker(w, WorkFunc[benchArgs](func(ctx context.Context, j *Job[benchArgs]) error {
				ran.Add(1)
				if j.Args.Checkpoint {
					return Checkpoint(ctx, "charged", map[string]string{"psp": "ch_1"})
				}
				return nil
			}))
			var elapsed time.Duration
			for range b.N {
				c, err := NewClient(newTestSQLite(b), &Config{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				params := make([]InsertManyParams, jobs)
				for i := range params {
					params[i] = InsertManyParams{Args: benchArgs{Checkpoint: tc.checkpoint}}
				}
				if _, err := c.InsertManyFast(context.Background(), params); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				wc := benchClientOn(b, c, w, 8)
				waitCompleted(b, wc, int64(jobs))
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*jobs), "ns/job")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkFanIn inserts 10,000 parents and one child waiting on all of
// them in one InsertMany call, drains the parents and waits for the child
// to complete; no-child is the same drain without the child, the baseline.
// It reports the insert's and the drain's wall time.
func BenchmarkFanIn(b *testing.B) {
	const parents = 10000
	for _, withChild := range []bool{false, true} {
		name := "no-child"
		if withChild {
			name = "one-child"
		}
		b.Run(name, func(b *testing.B) {
			var insert, drain time.Duration
			for range b.N {
				w := NewWorkers()
				AddWorker(w, WorkFunc[benchArgs](func(context.Context, *Job[benchArgs]) error { return nil }))
				c, err := NewClient(newTestSQLite(b), &Config{Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					b.Fatal(err)
				}
				params := make([]InsertManyParams, parents, parents+1)
				idx := make([]int, parents)
				for i := range parents {
					params[i] = InsertManyParams{Args: benchArgs{}}
					idx[i] = i
				}
				if withChild {
					params = append(params, InsertManyParams{Args: benchArgs{}, InsertOpts: &InsertOpts{DependsOnIndex: idx}})
				}
				start := time.Now()
				res, err := c.InsertMany(context.Background(), params)
				if err != nil {
					b.Fatal(err)
				}
				insert += time.Since(start)
				if withChild && res[parents].Job.State != leasetype.JobStatePending {
					b.Fatalf("child inserted %s, want pending", res[parents].Job.State)
				}
				start = time.Now()
				wc := benchClientOn(b, c, w, 8)
				waitCompleted(b, wc, int64(len(params)))
				drain += time.Since(start)
			}
			b.ReportMetric(float64(insert.Milliseconds())/float64(b.N), "insert-ms")
			b.ReportMetric(float64(drain.Milliseconds())/float64(b.N), "drain-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchClient starts a client on a fresh SQLite file with w on the default
// queue.
func benchClient(b *testing.B, w *Workers, workers int) *Client[*sql.Tx] {
	b.Helper()
	c, err := NewClient(newTestSQLite(b), &Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return benchClientOn(b, c, w, workers)
}

// benchClientOn starts a second client, with workers, on c's database.
func benchClientOn(b *testing.B, c *Client[*sql.Tx], w *Workers, workers int) *Client[*sql.Tx] {
	b.Helper()
	wc, err := NewClient(c.driver, &Config{
		Workers: w, Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond,
		Queues: map[string]QueueConfig{"default": {MaxWorkers: workers}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := wc.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = wc.StopAndCancel(ctx)
	})
	return wc
}

// waitCompleted waits until n jobs are completed.
func waitCompleted(b *testing.B, c *Client[*sql.Tx], n int64) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		counts, err := c.JobCounts(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		var done int64
		for _, qc := range counts {
			if qc.State == leasetype.JobStateCompleted {
				done += qc.Count
			}
		}
		if done >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("%d jobs not completed after 5 minutes", n)
}
