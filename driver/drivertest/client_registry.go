package drivertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// The registry calls of the fault seam: a partitioned client can neither
// beat nor deregister, as a crashed one.

func (e *faultExecutor[TTx]) ClientRegister(ctx context.Context, p *driver.ClientRegisterParams) error {
	if err := e.d.fault(ctx, false); err != nil {
		return err
	}
	return e.Executor.ClientRegister(ctx, p)
}

func (e *faultExecutor[TTx]) ClientRemove(ctx context.Context, p *driver.ClientRemoveParams) (bool, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return false, err
	}
	return e.Executor.ClientRemove(ctx, p)
}

// testClientRegistry: a started client appears in Clients with its host,
// pid, ID, queues and running count; an insert-only client does not; a
// stopped client disappears at once; a client that dies without
// deregistering (partitioned, then stopped) is shown as gone after three
// beats and pruned by a working client a lease TTL later.
func testClientRegistry[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	w := newBlockWorker(t, false)
	const beat = 50 * time.Millisecond
	worker := env.client(nil, leasehold.Config{
		ID: "reg-worker", Workers: workersFor(w, nil), RegistryInterval: beat, LeaseTTL: time.Second,
		Queues: map[string]leasehold.QueueConfig{"reg-b": {MaxWorkers: 5}, "reg-a": {MaxWorkers: 5}},
	})
	admin := env.client(nil, leasehold.Config{})

	clients := func() []*leasetype.ClientRow {
		t.Helper()
		rows, err := admin.Clients(context.Background())
		if err != nil {
			t.Fatalf("Clients: %v", err)
		}
		return rows
	}
	find := func(rows []*leasetype.ClientRow, owner string) *leasetype.ClientRow {
		for _, r := range rows {
			if r.Owner == owner {
				return r
			}
		}
		return nil
	}
	describe := func() string {
		var s string
		for _, r := range clients() {
			s += fmt.Sprintf("%+v; ", *r)
		}
		return "clients: " + s
	}

	// Start registers at once (in the background, so give it a moment).
	var rows []*leasetype.ClientRow
	waitFor(t, 5*time.Second, func() bool { rows = clients(); return len(rows) > 0 }, describe)
	me := find(rows, worker.Owner())
	if me == nil || len(rows) != 1 {
		t.Fatalf("after Start: %s; want the worker only (an idle client does not register)", describe())
	}
	host, _ := os.Hostname()
	if me.PID != int64(os.Getpid()) || me.ID != "reg-worker" || (host != "" && me.Host != host) ||
		!slices.Equal(me.Queues, []string{"reg-a", "reg-b"}) || !me.Alive || me.Running != 0 || me.Version == "" {
		t.Fatalf("worker's row = %+v; want pid %d, ID reg-worker, host %q, queues [reg-a reg-b], alive, 0 running, a version", *me, os.Getpid(), host)
	}

	// The running count follows the leases held.
	insert(t, admin, blockArgs{Name: "r1"}, &leasehold.InsertOpts{Queue: "reg-a"})
	insert(t, admin, blockArgs{Name: "r2"}, &leasehold.InsertOpts{Queue: "reg-b"})
	recvJob(t, w.started, 5*time.Second)
	recvJob(t, w.started, 5*time.Second)
	waitFor(t, 5*time.Second, func() bool {
		r := find(clients(), worker.Owner())
		return r != nil && r.Running == 2
	}, describe)
	w.releaseAll()
	waitFor(t, 5*time.Second, func() bool {
		r := find(clients(), worker.Owner())
		return r != nil && r.Running == 0 && r.SeenAt.After(me.SeenAt) && r.StartedAt.Equal(me.StartedAt)
	}, describe)

	// A client that stops deregisters.
	w2 := newBlockWorker(t, false)
	leaving, err := leasehold.NewClient(env.d, testConfig(leasehold.Config{ID: "reg-leaving", Workers: workersFor(w2, nil), RegistryInterval: beat}))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := leaving.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitFor(t, 5*time.Second, func() bool { return find(clients(), leaving.Owner()) != nil }, describe)
	if err := leaving.Stop(context.Background()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if r := find(clients(), leaving.Owner()); r != nil {
		t.Fatalf("stopped client still listed: %+v", *r)
	}

	// A client cut off from the database cannot beat or deregister: it is
	// shown as gone after three beats, then pruned by the worker a lease
	// TTL (1 s) later.
	fd := newFaultDriver(env.d)
	w3 := newBlockWorker(t, false)
	crashing, err := leasehold.NewClient[TTx](fd, testConfig(leasehold.Config{ID: "reg-crash", Workers: workersFor(w3, nil), RegistryInterval: beat}))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := crashing.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitFor(t, 5*time.Second, func() bool { return find(clients(), crashing.Owner()) != nil }, describe)
	fd.set(faultPartition)
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = crashing.Stop(stopCtx) // its deregistration fails: the row stays, as after a crash
	cutAt := time.Now()
	if find(clients(), crashing.Owner()) == nil {
		t.Fatalf("a partitioned client's row vanished at once: %s", describe())
	}
	waitFor(t, 5*time.Second, func() bool {
		r := find(clients(), crashing.Owner())
		return r != nil && !r.Alive
	}, describe)
	waitFor(t, 10*time.Second, func() bool { return find(clients(), crashing.Owner()) == nil }, describe)
	if took := time.Since(cutAt); took < time.Second {
		t.Fatalf("gone client pruned %s after it stopped beating, before its lease TTL window", took)
	}
	if find(clients(), worker.Owner()) == nil {
		t.Fatalf("the working client was pruned too: %s", describe())
	}
}
