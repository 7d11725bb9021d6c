package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// scratchTable creates a table of one row (id 1, v 1) in d's database.
func scratchTable(t *testing.T, d *Driver) {
	t.Helper()
	if _, err := d.DB().ExecContext(t.Context(), "CREATE TABLE scratch (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB; INSERT INTO scratch VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
}

// readV reads scratch's v on q.
func readV(t *testing.T, ctx context.Context, q querier) int {
	t.Helper()
	var v int
	if err := q.QueryRowContext(ctx, "SELECT v FROM scratch WHERE id = 1").Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDriverTxIsReadCommitted: the driver's own transactions are READ
// COMMITTED whatever the session's level (here REPEATABLE READ, the server
// default): a second read in one of them sees a commit made after the
// first. The session keeps its own level: a transaction begun after it on
// the same connection, with the session's level, still reads its snapshot.
func TestDriverTxIsReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	scratchTable(t, d)
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	set := func(v int) {
		t.Helper()
		if _, err := d.DB().ExecContext(ctx, "UPDATE scratch SET v = ? WHERE id = 1", v); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		e    *executor
	}{
		{"reserved connection", &executor{d: d, q: conn, onPool: true, conn: conn}},
		{"pool", d.GetExecutor().(*executor)},
	} {
		set(1)
		var first, second int
		err := c.e.write(ctx, func(q querier) error {
			first = readV(t, ctx, q)
			set(2)
			second = readV(t, ctx, q)
			return nil
		})
		if err != nil {
			t.Fatalf("%s: write: %v", c.name, err)
		}
		if first != 1 || second != 2 {
			t.Errorf("%s: the driver's transaction read %d then %d around a commit of 2, want 1 then 2 (READ COMMITTED)", c.name, first, second)
		}
	}

	// The session's own level is untouched: REPEATABLE READ.
	if _, err := conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
		t.Fatal(err)
	}
	first := readV(t, ctx, conn)
	set(3)
	second := readV(t, ctx, conn)
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Errorf("a transaction of the session's level after the driver's read %d then %d around a commit, want its snapshot twice (REPEATABLE READ)", first, second)
	}
}

// TestDriverTxRollsBack: a write whose function fails, or whose last
// statements fail, leaves nothing behind, and no transaction open on its
// connection: the next statement there commits on its own.
func TestDriverTxRollsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	scratchTable(t, d)
	conn, err := d.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e := &executor{d: d, q: conn, onPool: true, conn: conn}
	failed := errors.New("fail")
	err = e.write(ctx, func(q querier) error {
		if _, err := q.ExecContext(ctx, "UPDATE scratch SET v = 5 WHERE id = 1"); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("write = %v, want its function's error", err)
	}
	err = e.writeEnd(ctx, func(q querier) ([]stmt, error) {
		if _, err := q.ExecContext(ctx, "UPDATE scratch SET v = 6 WHERE id = 1"); err != nil {
			return nil, err
		}
		// The second row's key is taken: the batch stops there, before COMMIT.
		return []stmt{
			{query: "INSERT INTO scratch VALUES (2, 7)"},
			{query: "INSERT INTO scratch VALUES (?, ?)", args: []any{1, 8}},
		}, nil
	})
	if !isDuplicate(err) {
		t.Fatalf("writeEnd = %v, want the duplicate key of its last statement", err)
	}
	var rows int
	if err := d.DB().QueryRowContext(ctx, "SELECT COUNT(*) FROM scratch").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if v := readV(t, ctx, d.DB()); v != 1 || rows != 1 {
		t.Errorf("after two failed writes: v = %d, %d rows; want v 1 and 1 row, as before them", v, rows)
	}
	// Autocommit on the connection: another session sees the change at once.
	if _, err := conn.ExecContext(ctx, "UPDATE scratch SET v = 9 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if v := readV(t, ctx, d.DB()); v != 9 {
		t.Errorf("a statement on the connection after the failed writes left v = %d to other sessions, want 9 (committed: no transaction left open)", v)
	}
}

// countedDB opens d's database with DSN's settings, and the extra ones of
// tweak, on connections that count the packets they write (one per
// statement sent: the round trips).
func countedDB(t *testing.T, d *Driver, tweak func(*mysqldriver.Config)) (*sql.DB, *atomic.Int64) {
	t.Helper()
	var name string
	if err := d.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	cfg, err := mysqldriver.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	configure(cfg)
	if tweak != nil {
		tweak(cfg)
	}
	suffix := make([]byte, 6)
	rand.Read(suffix)
	network, writes := cfg.Net, &atomic.Int64{}
	cfg.Net = "lh-counted-" + hex.EncodeToString(suffix)
	mysqldriver.RegisterDialContext(cfg.Net, func(ctx context.Context, addr string) (net.Conn, error) {
		var dialer net.Dialer
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, writes: writes}, nil
	})
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, writes
}

// countingConn counts its writes.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// insertJobs inserts n plain jobs into queue q.
func insertJobs(t *testing.T, exec driver.Executor, n int) {
	t.Helper()
	jobs := make([]*driver.JobInsertParams, n)
	for i := range jobs {
		jobs[i] = &driver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 3}
	}
	if _, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: jobs}); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// TestLeaseRoundTrips: on a reserved connection a claim is three round
// trips (the exists read, the locking read that begins the transaction,
// the UPDATE with the COMMIT), a heartbeat and a finish two each, a finish
// of completions with a claim two (the completions' UPDATE, their attempt
// rows and the claim's locking read; the claim's UPDATE with the COMMIT;
// three before completeHeld) and a read of attempt rows with a claim two
// (the read with the locking read; the UPDATE with the COMMIT), whatever
// the number of jobs; the claimed rows are the stored ones.
func TestLeaseRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	db, writes := countedDB(t, d, nil)
	counted := New(db)
	insertJobs(t, counted.GetExecutor(), 40)
	r, err := counted.OpenReserved(ctx, &driver.OpenReservedParams{Conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Now(ctx); err != nil { // probes multi-statement support
		t.Fatal(err)
	}
	fc, ok := r.(driver.FinishClaimer)
	if !ok {
		t.Fatal("the reserved executor does not implement driver.FinishClaimer")
	}
	ac, ok := r.(driver.AttemptsClaimer)
	if !ok {
		t.Fatal("the reserved executor does not implement driver.AttemptsClaimer")
	}
	trips := func(what string, want int64, call func() error) {
		t.Helper()
		before := writes.Load()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := writes.Load() - before; got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	claimParams := func(n int) *driver.JobClaimParams {
		return &driver.JobClaimParams{Queue: "q", Max: n, Owner: "w", DefaultLeaseTTL: time.Minute}
	}
	assertStored := func(what string, jobs []*leasetype.JobRow) {
		t.Helper()
		for _, j := range jobs {
			stored, err := d.GetExecutor().JobGet(ctx, &driver.JobGetParams{ID: j.ID})
			if err != nil {
				t.Fatal(err)
			}
			if stored.LeaseToken != j.LeaseToken || stored.State != j.State || !stored.LeaseUntil.Equal(*j.LeaseUntil) || !stored.LeasedAt.Equal(*j.LeasedAt) {
				t.Errorf("%s: job %d claimed as token %d %s %v..%v, stored as token %d %s %v..%v", what, j.ID,
					j.LeaseToken, j.State, j.LeasedAt, j.LeaseUntil, stored.LeaseToken, stored.State, stored.LeasedAt, stored.LeaseUntil)
			}
		}
	}
	completions := func(jobs []*leasetype.JobRow) []*driver.JobFinish {
		items := make([]*driver.JobFinish, len(jobs))
		for i, j := range jobs {
			items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
		}
		return items
	}
	var jobs []*leasetype.JobRow
	trips("claim of 20", 3, func() (err error) {
		jobs, err = r.JobClaim(ctx, claimParams(20))
		return err
	})
	if len(jobs) != 20 {
		t.Fatalf("claimed %d jobs, want 20", len(jobs))
	}
	assertStored("claim", jobs)
	renewals := make([]driver.LeaseRenewal, len(jobs))
	for i, j := range jobs {
		renewals[i] = driver.LeaseRenewal{ID: j.ID, Token: j.LeaseToken, TTL: time.Minute}
	}
	trips("heartbeat of 20", 2, func() error {
		renewed, err := r.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Owner: "w", Leases: renewals})
		if err == nil && len(renewed) != 20 {
			t.Errorf("renewed %d leases, want 20", len(renewed))
		}
		return err
	})
	trips("finish of 10", 2, func() error {
		written, err := r.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: completions(jobs[:10])})
		if err == nil && len(written) != 10 {
			t.Errorf("finished %d jobs, want 10", len(written))
		}
		return err
	})
	var along []*leasetype.JobRow
	trips("finish of 10 with a claim of 10", 2, func() error {
		written, claimed, err := fc.JobFinishAndClaim(ctx, &driver.JobFinishParams{Owner: "w", Items: completions(jobs[10:])}, claimParams(10))
		if err == nil && (len(written) != 10 || len(claimed) != 10) {
			t.Errorf("finished %d jobs and claimed %d, want 10 and 10", len(written), len(claimed))
		}
		along = claimed
		return err
	})
	assertStored("finish with a claim", along)
	refs := make([]driver.LeaseRef, len(jobs))
	for i, j := range jobs {
		refs[i] = driver.LeaseRef{ID: j.ID, Token: j.LeaseToken}
	}
	trips("read of 20 attempt rows with a claim of 20", 2, func() error {
		found, claimed, err := ac.JobAttemptsAndClaim(ctx, &driver.JobAttemptsParams{Leases: refs}, claimParams(20))
		if err == nil && (len(found) != 20 || len(claimed) != 10) {
			t.Errorf("read %d attempt rows and claimed %d jobs, want 20 and the 10 left", len(found), len(claimed))
		}
		assertStored("read with a claim", claimed)
		along = append(along, claimed...)
		return err
	})
	trips("finish of 20 with a claim of an empty queue", 2, func() error {
		written, claimed, err := fc.JobFinishAndClaim(ctx, &driver.JobFinishParams{Owner: "w", Items: completions(along)}, claimParams(20))
		if err == nil && (len(written) != 20 || len(claimed) != 0) {
			t.Errorf("finished %d jobs and claimed %d, want 20 and none", len(written), len(claimed))
		}
		return err
	})
	trips("claim of an empty queue", 1, func() error {
		_, err := r.JobClaim(ctx, claimParams(20))
		return err
	})
}

// TestWithoutMultiStatements: on a *sql.DB whose DSN lacks multiStatements
// and interpolateParams, the driver's writes run in database/sql
// transactions instead, and leases work the same.
func TestWithoutMultiStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	db, _ := countedDB(t, d, func(cfg *mysqldriver.Config) {
		cfg.MultiStatements, cfg.InterpolateParams = false, false
	})
	plain := New(db)
	exec := plain.GetExecutor()
	insertJobs(t, exec, 4)
	if got := plain.multi.Load(); got != multiNo {
		t.Fatalf("multi-statement probe = %d, want %d (no)", got, multiNo)
	}
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 3, Owner: "w", DefaultLeaseTTL: time.Minute})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("claim = %d jobs, %v; want 3", len(jobs), err)
	}
	items := []*driver.JobFinish{{ID: jobs[0].ID, Token: jobs[0].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}}
	written, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: items})
	if err != nil || len(written) != 1 {
		t.Fatalf("finish = %v, %v; want [%d]", written, err, jobs[0].ID)
	}
	got, err := d.GetExecutor().JobGet(ctx, &driver.JobGetParams{ID: jobs[0].ID})
	if err != nil || got.State != leasetype.JobStateCompleted {
		t.Fatalf("finished job = %v, %v; want completed", got, err)
	}
	attempts, err := d.GetExecutor().JobAttempts(ctx, &driver.JobAttemptsParams{JobID: jobs[0].ID})
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts of the finished job = %d, %v; want 1", len(attempts), err)
	}
	ac := exec.(driver.AttemptsClaimer)
	found, claimed, err := ac.JobAttemptsAndClaim(ctx, &driver.JobAttemptsParams{Leases: []driver.LeaseRef{{ID: jobs[0].ID, Token: jobs[0].LeaseToken}}},
		&driver.JobClaimParams{Queue: "q", Max: 3, Owner: "w", DefaultLeaseTTL: time.Minute})
	if err != nil || len(found) != 1 || len(claimed) != 1 {
		t.Fatalf("read of the finished lease with a claim = %d attempt rows, %d claimed, %v; want 1 and the job left", len(found), len(claimed), err)
	}
}
