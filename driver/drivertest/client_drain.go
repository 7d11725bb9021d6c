package drivertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// drainArgs is a no-op job for the drain test.
type drainArgs struct {
	N int `json:"n"`
}

func (drainArgs) Kind() string { return "drivertest_drain" }

// testClientDrain: 8 clients with 50 workers each drain 20,000 jobs; every
// job runs exactly once and is completed exactly once.
func testClientDrain[TTx any](t *testing.T, b Backend[TTx]) {
	const (
		clients = 8
		workers = 50
		jobs    = 20000
	)
	runHeavy(t)
	env := newClientEnv(t, b)
	ctx := context.Background()
	inserter := env.client(nil, leasehold.Config{})
	for start := 0; start < jobs; start += 2000 {
		batch := make([]leasehold.InsertManyParams, 0, 2000)
		for i := start; i < start+2000; i++ {
			batch = append(batch, leasehold.InsertManyParams{Args: drainArgs{N: i}})
		}
		n, err := inserter.InsertManyFast(ctx, batch)
		if err != nil || n != len(batch) {
			t.Fatalf("InsertManyFast: n=%d err=%v", n, err)
		}
	}
	runs := make([]atomic.Int32, jobs)
	var total atomic.Int64
	for i := range clients {
		w := leasehold.NewWorkers()
		leasehold.AddWorker(w, leasehold.WorkFunc[drainArgs](func(ctx context.Context, j *leasehold.Job[drainArgs]) error {
			runs[j.Args.N].Add(1)
			total.Add(1)
			return nil
		}))
		env.client(nil, leasehold.Config{ID: fmt.Sprintf("drain-%d", i), Workers: w,
			Queues: map[string]leasehold.QueueConfig{"default": {MaxWorkers: workers}}})
	}
	// Count in the database only once every handler has run: a full count
	// on every poll would slow the drain it is measuring.
	waitFor(t, 3*time.Minute, func() bool { return total.Load() >= jobs && countState(t, env, leasetype.JobStateCompleted) == jobs },
		func() string {
			return fmt.Sprintf("%d of %d completed, %d handler runs", countState(t, env, leasetype.JobStateCompleted), jobs, total.Load())
		})
	for n := range runs {
		if got := runs[n].Load(); got != 1 {
			t.Fatalf("job %d ran %d times, want exactly 1", n, got)
		}
	}
	// Sampled: each job has exactly one attempt row, completed, on its only token.
	rows, err := env.exec.JobList(ctx, &driver.JobListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		row := rows[rand.IntN(len(rows))]
		atts := env.attempts(row.ID)
		if len(atts) != 1 || atts[0].Outcome != leasetype.OutcomeCompleted || atts[0].Token != 1 || row.Attempt != 1 {
			t.Fatalf("job %d: attempt %d, attempts %+v, want one completed attempt with token 1", row.ID, row.Attempt, atts)
		}
	}
}

// countState counts jobs in one state across queues.
func countState[TTx any](t *testing.T, env *clientEnv[TTx], state leasetype.JobState) int64 {
	t.Helper()
	counts, err := env.exec.JobCountByState(context.Background())
	if err != nil {
		t.Fatalf("JobCountByState: %v", err)
	}
	var n int64
	for _, c := range counts {
		if c.State == state {
			n += c.Count
		}
	}
	return n
}
