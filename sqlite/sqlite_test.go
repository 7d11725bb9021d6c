package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// newTestDriver opens a fresh, migrated database file in t.TempDir.
func newTestDriver(t *testing.T) *Driver {
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

func TestConformance(t *testing.T) {
	t.Parallel()
	drivertest.Exercise(t, drivertest.Backend[*sql.Tx]{
		New: func(t *testing.T) driver.Driver[*sql.Tx] { return newTestDriver(t) },
		BeginTx: func(ctx context.Context, d driver.Driver[*sql.Tx]) (*sql.Tx, error) {
			return d.(*Driver).DB().BeginTx(ctx, nil)
		},
		CommitTx:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		RollbackTx: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
	})
}

func TestMigrationsEmbedded(t *testing.T) {
	t.Parallel()
	ms := New(nil).Migrations()
	if len(ms) == 0 || ms[0].Version != 1 || ms[0].Up == "" || ms[0].Down == "" {
		t.Fatalf("migrations = %+v", ms)
	}
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	m := migrate.New(d)
	tables := func() int {
		var n int
		err := d.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema
			WHERE type = 'table' AND name IN ('leasehold_job', 'leasehold_attempt')`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tables(); n != 2 {
		t.Fatalf("after up: %d tables, want 2", n)
	}
	versions := len(d.Migrations())
	down, err := m.DownTo(ctx, 0)
	if err != nil || len(down) != versions {
		t.Fatalf("down = %v, %v; want all %d versions reverted", down, err, versions)
	}
	if n := tables(); n != 0 {
		t.Fatalf("after down: %d tables, want 0", n)
	}
	applied, err := d.GetExecutor().MigrationApplied(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("applied after down = %v, %v", applied, err)
	}
	up, err := m.Up(ctx)
	if err != nil || len(up) != versions {
		t.Fatalf("up again = %v, %v; want %d versions", up, err, versions)
	}
	if n := tables(); n != 2 {
		t.Fatalf("after up again: %d tables, want 2", n)
	}
	if again, err := m.Up(ctx); err != nil || len(again) != 0 {
		t.Fatalf("idempotent up = %v, %v", again, err)
	}
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

func TestClaimExclusive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	const total, workers = 2000, 8
	n, err := d.GetExecutor().JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: insertParams("default", total)})
	if err != nil || n != total {
		t.Fatalf("insert = %d, %v", n, err)
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for {
				jobs, err := d.GetExecutor().JobClaim(ctx, &driver.JobClaimParams{
					Queue: "default", Max: 7, Owner: fmt.Sprintf("w%d", w), DefaultLeaseTTL: time.Minute,
				})
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					seen[j.ID]++
					if j.State != leasetype.JobStateRunning || j.LeaseToken != 1 || j.Attempt != 1 {
						errs <- fmt.Errorf("claimed job %+v", j)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(seen) != total {
		t.Fatalf("claimed %d distinct jobs, want %d", len(seen), total)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("job %d claimed %d times", id, c)
		}
	}
}

func TestInsertInRolledBackUserTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	tx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ex := d.UnwrapExecutor(tx)
	res, err := ex.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: insertParams("default", 3)})
	if err != nil || len(res) != 3 {
		t.Fatalf("insert = %v, %v", res, err)
	}
	if _, err := ex.JobGet(ctx, &driver.JobGetParams{ID: res[0].Job.ID}); err != nil {
		t.Fatalf("read own insert in tx: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	jobs, err := d.GetExecutor().JobList(ctx, &driver.JobListParams{})
	if err != nil || len(jobs) != 0 {
		t.Fatalf("after rollback: %d jobs, %v", len(jobs), err)
	}
}

func TestUniqueKeyConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	const n = 20
	results := make([]*driver.JobInsertResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p := insertParams("default", 1)
			p[0].UniqueKey = "charge-42"
			res, err := d.GetExecutor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: p})
			errs[i] = errors.Join(err)
			if err == nil {
				results[i] = res[0]
			}
		})
	}
	wg.Wait()
	inserted := 0
	var id int64
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !results[i].UniqueSkipped {
			inserted++
		}
		if id == 0 {
			id = results[i].Job.ID
		}
		if results[i].Job.ID != id || results[i].Job.UniqueKey != "charge-42" {
			t.Fatalf("result %d = %+v, want job %d", i, results[i].Job, id)
		}
	}
	if inserted != 1 {
		t.Fatalf("%d inserts, want 1", inserted)
	}
}
