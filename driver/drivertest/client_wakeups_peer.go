package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientWakeupsAcrossPools: a job inserted through another driver on the
// same database, with a pool of its own (as another process would insert
// it), wakes a working client that polls only every 10 s: it starts within
// a fraction of the poll interval, for a single insert, a batch, and a fast
// batch. A backend that cannot wake clients across pools (no
// driver.Notifier) or cannot open a peer (no Backend.NewPeer) skips it.
func testClientWakeupsAcrossPools[TTx any](t *testing.T, b Backend[TTx]) {
	if b.NewPeer == nil {
		t.Skip("backend has no NewPeer")
	}
	env := newClientEnv(t, b)
	if _, ok := driver.NotifierOf(env.d); !ok {
		t.Skipf("driver %s does not implement driver.Notifier", env.d.Name())
	}
	peer := b.NewPeer(t, env.d)
	w := newBlockWorker(t, false)
	w.releaseAll()
	env.client(nil, leasehold.Config{PollInterval: 10 * time.Second, Workers: workersFor(w, nil)})
	// Let the first poll pass: from here on only a wake-up starts a job
	// within the poll interval.
	time.Sleep(300 * time.Millisecond)
	other := env.client(peer, leasehold.Config{})
	ctx := context.Background()

	// The bound leaves the wake-up (milliseconds) a wide margin on a busy
	// machine and is a fifth of the poll interval, which is what a job
	// waits without one.
	const within = 2 * time.Second
	waitStarted := func(what string, id int64) {
		t.Helper()
		waitFor(t, within, func() bool { return env.job(id).State == leasetype.JobStateCompleted }, func() string {
			return fmt.Sprintf("%s (job %d) inserted through another pool did not run within %s with a 10 s poll interval: state %s",
				what, id, within, env.job(id).State)
		})
	}
	for i := range 3 {
		row := insert(t, other, blockArgs{Name: fmt.Sprintf("peer-%d", i)}, nil)
		waitStarted("single insert", row.ID)
	}
	res, err := other.InsertMany(ctx, []leasehold.InsertManyParams{{Args: blockArgs{Name: "many-1"}}, {Args: blockArgs{Name: "many-2"}}})
	if err != nil {
		t.Fatalf("InsertMany: %v", err)
	}
	for _, r := range res {
		waitStarted("batch insert", r.Job.ID)
	}
	before := env.countCompleted()
	if _, err := other.InsertManyFast(ctx, []leasehold.InsertManyParams{{Args: blockArgs{Name: "fast"}}}); err != nil {
		t.Fatalf("InsertManyFast: %v", err)
	}
	waitFor(t, within, func() bool { return env.countCompleted() == before+1 }, func() string {
		return fmt.Sprintf("fast insert through another pool did not run within %s with a 10 s poll interval", within)
	})

	// A dependent made available by its parent's completion wakes the
	// queue's clients as an insert does.
	deps, err := other.InsertMany(ctx, []leasehold.InsertManyParams{
		{Args: blockArgs{Name: "parent"}},
		{Args: blockArgs{Name: "dependent"}, InsertOpts: &leasehold.InsertOpts{DependsOnIndex: []int{0}}},
	})
	if err != nil {
		t.Fatalf("InsertMany with a dependency: %v", err)
	}
	waitStarted("parent", deps[0].Job.ID)
	waitStarted("dependent released by its parent's completion", deps[1].Job.ID)
}

// countCompleted counts the completed jobs.
func (e *clientEnv[TTx]) countCompleted() int64 {
	return countState(e.t, e, leasetype.JobStateCompleted)
}
