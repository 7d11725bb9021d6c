package postgres

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// The benchmarks of issue 21 (stages and dependencies) on Postgres, each on
// a fresh schema; the root package has the same ones on SQLite. Reproduce
// one at a time with
//
//	go test -run '^$' -bench 'PGCheckpointWrite' -benchtime 2000x ./postgres
//	go test -run '^$' -bench 'PGDrainCheckpoint|PGFanIn' -benchtime 1x ./postgres

// stagesBenchArgs is a job of these benchmarks; Checkpoint says whether its
// handler records one stage.
type stagesBenchArgs struct {
	Checkpoint bool `json:"checkpoint,omitempty"`
}

func (stagesBenchArgs) Kind() string { return "bench_stages" }

// BenchmarkPGCheckpointWrite is one checkpoint from a handler: one op is
// one leasehold.Checkpoint call of a small state on the job the handler
// holds (one fenced UPDATE plus the history row, one round trip).
func BenchmarkPGCheckpointWrite(b *testing.B) {
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
	d := newTestDriver(b)
	c := stagesBenchWorkers(b, d, w, 1)
	if _, err := c.Insert(context.Background(), stagesBenchArgs{}, nil); err != nil {
		b.Fatal(err)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPGDrainCheckpoint drains 5,000 jobs inserted beforehand with 16
// workers, without a checkpoint and with one per job; it reports ns/job.
func BenchmarkPGDrainCheckpoint(b *testing.B) {
	for _, tc := range []struct {
		name       string
		checkpoint bool
	}{{"none", false}, {"one-per-job", true}} {
		b.Run(tc.name, func(b *testing.B) {
			const jobs = 5000
			w := leasehold.NewWorkers()
			leasehold.AddWorker(w, leasehold.WorkFunc[stagesBenchArgs](func(ctx context.Context, j *leasehold.Job[stagesBenchArgs]) error {
				if j.Args.Checkpoint {
					return leasehold.Checkpoint(ctx, "charged", map[string]string{"psp": "ch_1"})
				}
				return nil
			}))
			var elapsed time.Duration
			for range b.N {
				d := newTestDriver(b)
				c := stagesBenchInserter(b, d)
				params := make([]leasehold.InsertManyParams, jobs)
				for i := range params {
					params[i] = leasehold.InsertManyParams{Args: stagesBenchArgs{Checkpoint: tc.checkpoint}}
				}
				if _, err := c.InsertManyFast(context.Background(), params); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				wc := stagesBenchWorkers(b, d, w, 16)
				stagesWaitCompleted(b, wc, jobs)
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*jobs), "ns/job")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkPGFanIn inserts 10,000 parents and one child waiting on all of
// them in one InsertMany call, drains them with 16 workers and waits for
// the child to complete; no-child is the same drain without the child. It
// reports the insert's and the drain's wall time.
func BenchmarkPGFanIn(b *testing.B) {
	const parents = 10000
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
				d := newTestDriver(b)
				c := stagesBenchInserter(b, d)
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
				res, err := c.InsertMany(context.Background(), params)
				if err != nil {
					b.Fatal(err)
				}
				insert += time.Since(start)
				if withChild && res[parents].Job.State != leasetype.JobStatePending {
					b.Fatalf("child inserted %s, want pending", res[parents].Job.State)
				}
				start = time.Now()
				wc := stagesBenchWorkers(b, d, w, 16)
				stagesWaitCompleted(b, wc, int64(len(params)))
				drain += time.Since(start)
			}
			b.ReportMetric(float64(insert.Milliseconds())/float64(b.N), "insert-ms")
			b.ReportMetric(float64(drain.Milliseconds())/float64(b.N), "drain-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// stagesBenchInserter returns a client without workers on d.
func stagesBenchInserter(b *testing.B, d *Driver) *leasehold.Client[pgx.Tx] {
	b.Helper()
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// stagesBenchWorkers starts a client on d with w on the default queue.
func stagesBenchWorkers(b *testing.B, d *Driver, w *leasehold.Workers, workers int) *leasehold.Client[pgx.Tx] {
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
func stagesWaitCompleted(b *testing.B, c *leasehold.Client[pgx.Tx], n int64) {
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
