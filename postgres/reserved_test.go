package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
)

// resized returns a driver like d (the same options, database and schema)
// on a new pool of at most conns connections with d's pool's settings,
// closed when the test ends.
func resized(t *testing.T, d *Driver, conns int) *Driver {
	t.Helper()
	cfg := d.Pool().Config()
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &Driver{pool: pool, migrations: d.migrations, q: d.q, channel: d.channel,
		listenConfig: d.listenConfig, noListen: d.noListen, logger: d.logger}
}

// TestReservedPoolLifecycle: a working client opens its reserved pool at
// Start, with the user's pool's connection settings and hooks, all its
// connections established, and closes it at Stop; an insert-only client
// opens none, and ReservedConns < 0 turns it off.
func TestReservedPoolLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := newTestDriver(t).Pool().Config() // a migrated schema
	suffix := make([]byte, 6)
	rand.Read(suffix)
	app := "lh_reserved_" + hex.EncodeToString(suffix)
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.MaxConns = 2
	var hooked atomic.Int64
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error {
		hooked.Add(1)
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d := New(pool)
	// backends counts the server sessions with the test's application name:
	// the user's pool, the listener and the reserved pool.
	backends := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	poolConns := func() int { return int(pool.Stat().TotalConns()) }

	start := func(reserved int) *leasehold.Client[pgx.Tx] {
		t.Helper()
		w := leasehold.NewWorkers()
		leasehold.AddWorker(w, leasehold.WorkFunc[poolArgs](func(context.Context, *leasehold.Job[poolArgs]) error { return nil }))
		c, err := leasehold.NewClient(d, &leasehold.Config{Workers: w, ReservedConns: reserved})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return c
	}
	stop := func(c *leasehold.Client[pgx.Tx]) {
		t.Helper()
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitBackends := func(want func() int, what string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got := backends(); got != want(); got = backends() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d server sessions, want %d", what, got, want())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	waitBackends(poolConns, "before start")
	hookedBefore := hooked.Load()
	c := start(0)
	// The reserved connections exist once Start returns; the listener
	// connects beside them.
	waitBackends(func() int { return poolConns() + DefaultReservedConns + 1 }, "started")
	if got := hooked.Load() - hookedBefore; got < DefaultReservedConns {
		t.Errorf("AfterConnect ran %d times at start, want at least %d (the reserved pool's connections)", got, DefaultReservedConns)
	}
	stop(c)
	waitBackends(poolConns, "stopped")

	c = start(1)
	waitBackends(func() int { return poolConns() + 1 + 1 }, "started with ReservedConns 1")
	stop(c)
	c = start(-1)
	waitBackends(func() int { return poolConns() + 1 }, "started with ReservedConns -1")
	stop(c)
	waitBackends(poolConns, "stopped")
}

// TestReservedPoolSurvivesTerminatedConnections: the reserved pool replaces
// connections the server terminated.
func TestReservedPoolSurvivesTerminatedConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	r, err := d.OpenReserved(ctx, &driver.OpenReservedParams{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pool := r.(*reservedExecutor).pool
	var pids []uint32
	var held []*pgxpool.Conn
	for range 2 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		pids = append(pids, c.Conn().PgConn().PID())
	}
	for _, c := range held {
		c.Release()
	}
	if _, err := d.Pool().Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := r.Now(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reserved executor after its connections were terminated: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
