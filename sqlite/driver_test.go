package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
	"github.com/leasehold/leasehold/migrate"
)

// newTestDriver opens a fresh, migrated database file in t.TempDir.
func newTestDriver(t testing.TB) *Driver {
	t.Helper()
	d, db, err := Open(filepath.Join(t.TempDir(), "leasehold.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrate.New(d).Up(context.Background()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return d
}

// newPeerDriver opens d's database file again, with a pool of its own, as
// another process would.
func newPeerDriver(t *testing.T, d *Driver) *Driver {
	t.Helper()
	var seq int
	var name, path string
	if err := d.DB().QueryRowContext(t.Context(), "PRAGMA database_list").Scan(&seq, &name, &path); err != nil {
		t.Fatalf("read database path: %v", err)
	}
	peer, db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return peer
}

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, drivertest.Backend[*sql.Tx]{
		New: func(t *testing.T) driver.Driver[*sql.Tx] { return newTestDriver(t) },
		BeginTx: func(ctx context.Context, d driver.Driver[*sql.Tx]) (*sql.Tx, error) {
			return d.(*Driver).DB().BeginTx(ctx, nil)
		},
		CommitTx:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		RollbackTx: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
		NewSized: func(t *testing.T, conns int) driver.Driver[*sql.Tx] {
			d := newTestDriver(t)
			d.DB().SetMaxOpenConns(conns)
			return d
		},
		NewPeer: func(t *testing.T, d driver.Driver[*sql.Tx]) driver.Driver[*sql.Tx] {
			return newPeerDriver(t, d.(*Driver))
		},
		// BeginTx's BEGIN IMMEDIATE takes the single write lock; a
		// read-only transaction is a plain (deferred) BEGIN.
		BeginReadTx: func(ctx context.Context, d driver.Driver[*sql.Tx]) (*sql.Tx, error) {
			return d.(*Driver).DB().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		},
	})
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	// Check several pooled connections, not just the first.
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := d.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for _, c := range conns {
		var mode string
		var sync, busy, fk int
		for _, p := range []struct {
			pragma string
			dest   any
		}{
			{"journal_mode", &mode}, {"synchronous", &sync}, {"busy_timeout", &busy}, {"foreign_keys", &fk},
		} {
			if err := c.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(p.dest); err != nil {
				t.Fatalf("pragma %s: %v", p.pragma, err)
			}
		}
		if mode != "wal" || sync != 2 || busy != BusyTimeout || fk != 1 {
			t.Errorf("journal_mode=%s synchronous=%d busy_timeout=%d foreign_keys=%d, want wal 2 %d 1",
				mode, sync, busy, BusyTimeout, fk)
		}
	}
}

func TestNowIsDatabaseClock(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	now, err := d.GetExecutor().Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if now.Location() != time.UTC || time.Since(now).Abs() > 5*time.Second {
		t.Fatalf("Now = %v", now)
	}
}

func TestExecSeveralStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	err := d.GetExecutor().Exec(ctx, `CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1); INSERT INTO t VALUES (2);`)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := d.DB().QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows = %d, %v; want 2", n, err)
	}
}

func insertParams(queue string, n int) []*driver.JobInsertParams {
	ps := make([]*driver.JobInsertParams, n)
	for i := range ps {
		ps[i] = &driver.JobInsertParams{
			Kind: "email", Queue: queue, Priority: 1, EncodedArgs: []byte(fmt.Sprintf(`{"n":%d}`, i)),
			Metadata: []byte("{}"), MaxAttempts: 5,
		}
	}
	return ps
}
