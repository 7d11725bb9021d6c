package drivertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// busyArgs is the busy-pool test's job: its handler holds a transaction of
// the user's pool.
type busyArgs struct {
	N int `json:"n"`
}

func (busyArgs) Kind() string { return "drivertest_busy" }

// testClientBusyPool: handlers holding every connection of the driver's pool
// in long business transactions (three lease TTLs each, more handlers than
// connections, so some wait seconds for one) do not starve the lease
// machinery: no lease is lost, every job runs once and completes.
func testClientBusyPool[TTx any](t *testing.T, b Backend[TTx]) {
	const (
		poolConns = 4
		jobs      = 8
		ttl       = time.Second
		hold      = 3 * time.Second
	)
	if b.NewSized == nil {
		t.Fatal("Backend.NewSized is not set: the busy-pool test needs a driver with a pool of a given size")
	}
	begin := b.BeginTx
	if b.BeginReadTx != nil {
		begin = b.BeginReadTx
	}
	d := b.NewSized(t, poolConns)
	env := &clientEnv[TTx]{t: t, b: b, d: d, exec: d.GetExecutor()}
	runs := newRunLog()
	var (
		mu           sync.Mutex
		holding, top int           // transactions open now, and the most at once
		longestWait  time.Duration // the longest a handler waited for its BEGIN
		handlerErrs  []string
	)
	var finished atomic.Int64
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[busyArgs](func(ctx context.Context, j *leasehold.Job[busyArgs]) error {
		runs.add(j.JobRow)
		fail := func(err error) error {
			mu.Lock()
			handlerErrs = append(handlerErrs, fmt.Sprintf("job %d: %v", j.ID, err))
			mu.Unlock()
			return err
		}
		asked := time.Now()
		tx, err := begin(ctx, d)
		if err != nil {
			return fail(fmt.Errorf("begin: %w", err))
		}
		defer b.RollbackTx(context.WithoutCancel(ctx), tx) //nolint:errcheck // no-op after commit
		waited := time.Since(asked)
		mu.Lock()
		holding++
		top = max(top, holding)
		longestWait = max(longestWait, waited)
		mu.Unlock()
		defer func() {
			mu.Lock()
			holding--
			mu.Unlock()
		}()
		// A read in the transaction, so that it holds its connection (and,
		// on SQLite, a read snapshot) as a business transaction would.
		if _, err := d.UnwrapExecutor(tx).JobGet(ctx, &driver.JobGetParams{ID: j.ID}); err != nil {
			return fail(fmt.Errorf("read in transaction: %w", err))
		}
		select {
		case <-time.After(hold):
		case <-ctx.Done():
			return fail(fmt.Errorf("context ended while holding the transaction: %w", context.Cause(ctx)))
		}
		if err := b.CommitTx(ctx, tx); err != nil {
			return fail(fmt.Errorf("commit: %w", err))
		}
		finished.Add(1)
		return nil
	}))
	inserter := env.client(nil, leasehold.Config{})
	ids := make([]int64, jobs)
	for i := range ids {
		ids[i] = insert(t, inserter, busyArgs{N: i}, nil).ID
	}
	c := env.client(nil, leasehold.Config{
		Workers:  w,
		Queues:   map[string]leasehold.QueueConfig{"default": {MaxWorkers: jobs}},
		LeaseTTL: ttl,
	})

	waitFor(t, 90*time.Second, func() bool { return finished.Load() >= jobs },
		func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("%d of %d handlers finished; stats %+v; handler errors %v", finished.Load(), jobs, c.Stats(), handlerErrs)
		})
	for _, id := range ids {
		env.waitState(id, leasetype.JobStateCompleted, 30*time.Second)
	}
	// The client counts an outcome once its write returned, a moment after
	// the row shows it.
	waitFor(t, 30*time.Second, func() bool { return c.Stats().Completed >= jobs },
		func() string { return fmt.Sprintf("stats %+v", c.Stats()) })
	mu.Lock()
	defer mu.Unlock()
	if len(handlerErrs) > 0 {
		t.Errorf("handler errors: %v", handlerErrs)
	}
	for _, id := range ids {
		if n := runs.count(id); n != 1 {
			t.Errorf("job %d ran %d times, want once", id, n)
		}
		if got := env.outcomes(id); len(got) != 1 || got[0] != leasetype.OutcomeCompleted {
			t.Errorf("job %d attempt outcomes = %v, want one completed", id, got)
		}
	}
	st := c.Stats()
	if st.LeasesLost != 0 || st.FencedWrites != 0 || st.Expired != 0 || st.Completed != jobs {
		t.Errorf("stats: %d leases lost, %d fenced writes, %d expired, %d completed; want 0, 0, 0, %d",
			st.LeasesLost, st.FencedWrites, st.Expired, st.Completed, jobs)
	}
	// The pool was exhausted: handlers waited longer than a lease's TTL for
	// a connection while their leases were held, and renewals still landed.
	if longestWait <= ttl {
		t.Errorf("longest wait for a transaction %s, want more than the lease TTL %s: the pool was never exhausted", longestWait, ttl)
	}
	t.Logf("at most %d transactions held at once; longest wait for one %s; %d renewal statements", top, longestWait.Round(time.Millisecond), st.HeartbeatStatements)
}
