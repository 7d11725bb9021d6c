package drivertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// The benchmarks of stages and dependencies, the same on every backend:
// each backend's stages_bench_test.go runs them on fresh, migrated drivers
// from newDriver. BENCHMARKS.md gives the commands and figures.

// stagesBenchArgs is a job of these benchmarks; Checkpoint says whether its
// handler records one stage.
type stagesBenchArgs struct {
	Checkpoint bool `json:"checkpoint,omitempty"`
}

func (stagesBenchArgs) Kind() string { return "bench_stages" }

// BenchCheckpointWrite measures one checkpoint from a handler: one op is
// one leasehold.Checkpoint call of a small state on the job the handler
// holds (one fenced write plus the history row).
func BenchCheckpointWrite[TTx any](b *testing.B, newDriver func(testing.TB) driver.Driver[TTx]) {
	done := make(chan error, 1)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[stagesBenchArgs](func(ctx context.Context, _ *leasehold.Job[stagesBenchArgs]) error {
		b.ResetTimer()
		for i := range b.N {
			if err := leasehold.Checkpoint(ctx, "step", map[string]int{"i": i}); err != nil {
				done <- err
				return err
			}
		}
		b.StopTimer()
		done <- nil
		return nil
	}))
	c := stagesBenchWorkers(b, newDriver(b), w, 1)
	if _, err := c.Insert(context.Background(), stagesBenchArgs{}, nil); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchDrainCheckpoint drains jobs inserted beforehand with workers
// workers, without a checkpoint and with one per job; it reports ns/job.
func BenchDrainCheckpoint[TTx any](b *testing.B, newDriver func(testing.TB) driver.Driver[TTx], jobs, workers int) {
	for _, tc := range []struct {
		name       string
		checkpoint bool
	}{{"none", false}, {"one-per-job", true}} {
		b.Run(tc.name, func(b *testing.B) {
			w := leasehold.NewWorkers()
			leasehold.AddWorker(w, leasehold.WorkFunc[stagesBenchArgs](func(ctx context.Context, j *leasehold.Job[stagesBenchArgs]) error {
				if j.Args.Checkpoint {
					return leasehold.Checkpoint(ctx, "charged", map[string]string{"psp": "ch_1"})
				}
				return nil
			}))
			var elapsed time.Duration
			for range b.N {
				d := newDriver(b)
				params := make([]leasehold.InsertManyParams, jobs)
				for i := range params {
					params[i] = leasehold.InsertManyParams{Args: stagesBenchArgs{Checkpoint: tc.checkpoint}}
				}
				if _, err := stagesBenchInserter(b, d).InsertManyFast(context.Background(), params); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				stagesWaitCompleted(b, stagesBenchWorkers(b, d, w, workers), int64(jobs))
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*jobs), "ns/job")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchFanIn inserts parents jobs and one child waiting on all of them in
// one InsertMany call, drains them with workers workers and waits for the
// child to complete; no-child is the same drain without the child. It
// reports the insert's and the drain's wall time.
func BenchFanIn[TTx any](b *testing.B, newDriver func(testing.TB) driver.Driver[TTx], parents, workers int) {
	for _, withChild := range []bool{false, true} {
		name := "no-child"
		if withChild {
			name = "one-child"
		}
		b.Run(name, func(b *testing.B) {
			var insert, drain time.Duration
			for range b.N {
				w := leasehold.NewWorkers()
				leasehold.AddWorker(w, leasehold.WorkFunc[stagesBenchArgs](func(context.Context, *leasehold.Job[stagesBenchArgs]) error { return nil }))
				d := newDriver(b)
				params := make([]leasehold.InsertManyParams, parents, parents+1)
				idx := make([]int, parents)
				for i := range parents {
					params[i] = leasehold.InsertManyParams{Args: stagesBenchArgs{}}
					idx[i] = i
				}
				if withChild {
					params = append(params, leasehold.InsertManyParams{Args: stagesBenchArgs{}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: idx}})
				}
				start := time.Now()
				res, err := stagesBenchInserter(b, d).InsertMany(context.Background(), params)
				if err != nil {
					b.Fatal(err)
				}
				insert += time.Since(start)
				if withChild && res[parents].Job.State != leasetype.JobStatePending {
					b.Fatalf("child inserted %s, want pending", res[parents].Job.State)
				}
				start = time.Now()
				stagesWaitCompleted(b, stagesBenchWorkers(b, d, w, workers), int64(len(params)))
				drain += time.Since(start)
			}
			b.ReportMetric(float64(insert.Milliseconds())/float64(b.N), "insert-ms")
			b.ReportMetric(float64(drain.Milliseconds())/float64(b.N), "drain-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// stagesBenchInserter returns a client without workers on d.
func stagesBenchInserter[TTx any](b *testing.B, d driver.Driver[TTx]) *leasehold.Client[TTx] {
	b.Helper()
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// stagesBenchWorkers starts a client on d with w on the default queue.
func stagesBenchWorkers[TTx any](b *testing.B, d driver.Driver[TTx], w *leasehold.Workers, workers int) *leasehold.Client[TTx] {
	b.Helper()
	wc, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: w, Logger: slog.New(slog.DiscardHandler), PollInterval: 20 * time.Millisecond,
		Queues: map[string]leasehold.QueueConfig{"default": {MaxWorkers: workers}},
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

// stagesWaitCompleted waits until n jobs are completed.
func stagesWaitCompleted[TTx any](b *testing.B, c *leasehold.Client[TTx], n int64) {
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
