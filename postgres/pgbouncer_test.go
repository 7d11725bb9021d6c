package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/demo"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/migrate"
)

// The deployment these tests prove: PgBouncer (the installed version, 1.18
// on Debian bookworm) in transaction pool mode in front of the database;
// pgx in a query exec mode that prepares no named statements
// (default_query_exec_mode=exec, or simple_protocol or cache_describe);
// the tables in a schema named by Options.Schema, since PgBouncer refuses
// the search_path startup parameter; LISTEN on a direct connection
// (Options.ListenURL).

// bouncerPool opens a pool of at most maxConns connections through b in
// pgx's query exec mode mode ("exec"), closed when the test ends.
func bouncerPool(t testing.TB, b *pgtest.Bouncer, mode string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return pgtest.NewPool(t, pgtest.ParsePoolConfig(t, b.URL+"&default_query_exec_mode="+mode, maxConns))
}

// bouncerDriver returns a driver through b on a fresh, migrated schema named
// by Options.Schema, with opts' other settings.
func bouncerDriver(t testing.TB, b *pgtest.Bouncer, mode string, opts Options) *Driver {
	t.Helper()
	opts.Schema = pgtest.Schema(t, "lh_pgb_")
	d, err := NewWithOptions(bouncerPool(t, b, mode, 12), &opts)
	if err != nil {
		t.Fatal(err)
	}
	return migrated(t, d)
}

// bouncerBackend is the conformance suite's Backend through a PgBouncer of
// each test's own in pgx's exec mode mode: the job tables in a schema named
// by Options.Schema, the suite's business tables (created as a user's
// would be) in another, found by the server connections' search_path
// (pgtest.BouncerOptions.SearchPath), and LISTEN on a direct connection.
func bouncerBackend(mode string) drivertest.Backend[pgx.Tx] {
	return backendOf(func(t *testing.T) *Driver {
		business := pgtest.Schema(t, "lh_pgbapp_")
		b := pgtest.PgBouncer(t, &pgtest.BouncerOptions{SearchPath: business})
		return bouncerDriver(t, b, mode, Options{ListenURL: pgtest.URL()})
	})
}

// pgBouncerClientTests are the client guarantees that depend on the
// database's behaviour rather than the client's alone: they run through
// PgBouncer. OwnInsertClaimsOnce is left out by design: behind a pooler the
// client cannot recognise its own notifications (the session's process ID
// is the pooler's), and claims once more per insert.
var pgBouncerClientTests = []string{
	"Drain", "PausedPastLease", "CrashRecovery", "StuckPolicy", "Outcomes", "Stop",
	"CompleteTx", "ResolveStuckTx", "InsertTx", "InsertLeased", "Heartbeats", "HeartbeatCoalescing",
	"BadInput", "UniqueInsert", "Wakeups", "HeadJobDuringBacklog", "QueuePause",
	"GlobalLimit", "KindLimit", "RateLimit", "CancelRunning", "CancelCrashedHolder",
	"PeriodicLeaderKilled", "PeriodicRestart", "PeriodicLeaderStepsDown",
	"Retention", "UniqueOpts", "Subscribe", "BusyPool",
}

// TestPgBouncerClient runs the client half of the conformance suite through
// PgBouncer in transaction mode, with default_query_exec_mode=exec, the
// schema option and LISTEN on a direct connection.
func TestPgBouncerClient(t *testing.T) {
	t.Parallel()
	drivertest.ExerciseClient(t, bouncerBackend("exec"), pgBouncerClientTests...)
}

// TestPgBouncerExecModes: the exec modes that prepare no named statement
// across transactions work through PgBouncer in transaction mode; a few
// client tests each that insert, claim, complete in a transaction and
// notify.
func TestPgBouncerExecModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"simple_protocol", "cache_describe"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			drivertest.ExerciseClient(t, bouncerBackend(mode),
				"Drain", "CompleteTx", "InsertTx", "InsertLeased", "UniqueInsert", "QueuePause", "Wakeups")
		})
	}
}

// TestPgBouncerDefaultModeFails documents why PgBouncer before 1.21 needs
// another exec mode: pgx's default (cache_statement) prepares named
// statements on the session, which a transaction-mode pooler does not keep.
// From 1.21 with max_prepared_statements set, PgBouncer tracks them and the
// default mode works.
func TestPgBouncerDefaultModeFails(t *testing.T) {
	t.Parallel()
	b := pgtest.PgBouncer(t, &pgtest.BouncerOptions{PoolSize: 2, MaxPreparedStatements: 200})
	schema := pgtest.Schema(t, "lh_pgb_")
	d, err := NewWithOptions(bouncerPool(t, b, "cache_statement", 8), &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var errs []error
	// Migrate, then statements from several pooled connections at once, so
	// that they land on server connections prepared by others.
	if _, err := migrate.New(d).Up(ctx); err != nil {
		errs = append(errs, err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, err := d.GetExecutor().JobList(ctx, &driver.JobListParams{Limit: 1}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if pgtest.BouncerTracksPrepared(b.Version) {
		if len(errs) > 0 {
			t.Fatalf("PgBouncer %s with max_prepared_statements: %v", b.Version, errs[0])
		}
		return
	}
	if len(errs) == 0 {
		t.Fatalf("PgBouncer %s in transaction mode ran pgx's default exec mode without an error; update the documentation", b.Version)
	}
	t.Logf("PgBouncer %s, cache_statement: %v", b.Version, errs[0])
}

type bouncerArgs struct{ N int }

func (bouncerArgs) Kind() string { return "bouncer" }

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startWorking starts a client on d that works bouncerArgs jobs, reporting
// each job's ID on the returned channel, and stops it when the test ends.
func startWorking(t *testing.T, d *Driver, cfg leasehold.Config) (*leasehold.Client[pgx.Tx], <-chan int64) {
	t.Helper()
	done := make(chan int64, 1000)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[bouncerArgs](func(ctx context.Context, j *leasehold.Job[bouncerArgs]) error {
		done <- j.ID
		return nil
	}))
	cfg.Workers = w
	c, err := leasehold.NewClient(d, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) }) //nolint:errcheck
	return c, done
}

// waitJob waits for the job id on done, failing after within.
func waitJob(t *testing.T, done <-chan int64, id int64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := time.After(within)
	for {
		select {
		case got := <-done:
			if got == id {
				return time.Since(start)
			}
		case <-deadline:
			t.Fatalf("job %d not worked within %v", id, within)
		}
	}
}

// TestPgBouncerListenThroughPooler: a client whose LISTEN goes through
// PgBouncer in transaction mode hears nothing; it says so once (a warning,
// Stats.NotificationsSilent) and its jobs still run, found by polling. The
// driver logs that it found a pooler.
func TestPgBouncerListenThroughPooler(t *testing.T) {
	t.Parallel()
	b := pgtest.PgBouncer(t, nil)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	d := bouncerDriver(t, b, "exec", Options{Logger: logger})
	c, done := startWorking(t, d, leasehold.Config{PollInterval: 300 * time.Millisecond, Logger: logger})
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().NotificationsSilent == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no silence found within 20 s; stats %+v\nlogs:\n%s", c.Stats(), logs.String())
		}
		res, err := c.Insert(t.Context(), bouncerArgs{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, done, res.Job.ID, 5*time.Second)
		time.Sleep(100 * time.Millisecond)
	}
	// After the warning, jobs another client inserts are found by polling.
	other, err := leasehold.NewClient(d, &leasehold.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	res, err := other.Insert(t.Context(), bouncerArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, done, res.Job.ID, 5*time.Second)
	out := logs.String()
	for _, want := range []string{"insert notifications are not arriving", "connection pooler"} {
		if !strings.Contains(out, want) {
			t.Fatalf("logs lack %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "insert notifications are not arriving"); n != 1 {
		t.Fatalf("%d silence warnings, want 1:\n%s", n, out)
	}
	if d.pooler.Load() != poolerYes {
		t.Fatalf("pooler not detected")
	}
}

// TestPgBouncerListenURL: with the pool through PgBouncer and LISTEN on a
// direct connection (Options.ListenURL), another client's insert wakes the
// worker at once, long before its poll interval, and the client never finds
// the notifications silent, although it cannot recognise its own.
func TestPgBouncerListenURL(t *testing.T) {
	t.Parallel()
	b := pgtest.PgBouncer(t, nil)
	d := bouncerDriver(t, b, "exec", Options{ListenURL: pgtest.URL()})
	const poll = 2 * time.Second // silence window: 3 polls, 6 s
	c, done := startWorking(t, d, leasehold.Config{PollInterval: poll})
	other, err := leasehold.NewClient(d, &leasehold.Config{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the worker's first poll
	var slowest time.Duration
	end := time.Now().Add(8 * time.Second) // longer than the silence window
	for i := 0; time.Now().Before(end); i++ {
		ins := other
		if i%2 == 1 {
			ins = c // the worker's own inserts, which set up the silence check
		}
		res, err := ins.Insert(t.Context(), bouncerArgs{N: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		took := waitJob(t, done, res.Job.ID, poll+time.Second)
		if ins == other {
			slowest = max(slowest, took)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if slowest > poll/2 {
		t.Fatalf("another client's job took %v to start, want well under the poll interval %v", slowest, poll)
	}
	if s := c.Stats(); s.NotificationsSilent != 0 {
		t.Fatalf("NotificationsSilent = %d with LISTEN on a direct connection, want 0", s.NotificationsSilent)
	}
	t.Logf("slowest wake-up by another client's insert: %v", slowest)
}

// TestDisableListen: with Options.DisableListen the driver offers no
// notifications; clients poll, and say nothing about notifications.
func TestDisableListen(t *testing.T) {
	t.Parallel()
	b := pgtest.PgBouncer(t, nil)
	d := bouncerDriver(t, b, "exec", Options{DisableListen: true})
	if _, ok := driver.NotifierOf(d); ok {
		t.Fatal("NotifierOf reports a notifier with DisableListen")
	}
	if _, ok := driver.NotifierOf(New(d.Pool())); !ok {
		t.Fatal("NotifierOf reports no notifier on New's driver")
	}
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	_, done := startWorking(t, d, leasehold.Config{PollInterval: 200 * time.Millisecond, Logger: logger})
	other, err := leasehold.NewClient(d, &leasehold.Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	res, err := other.Insert(t.Context(), bouncerArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitJob(t, done, res.Job.ID, 5*time.Second)
	if out := logs.String(); strings.Contains(out, "notifications") {
		t.Fatalf("a client without notifications logged about them:\n%s", out)
	}
}

// TestPgBouncerDemo runs the payments demo, faults and all, through
// PgBouncer in transaction mode: every payment settles, none is charged
// twice. The payments tables are found by the server connections'
// search_path (as in a user's database), the job tables by Options.Schema.
func TestPgBouncerDemo(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, "lh_pgbd_")
	b := pgtest.PgBouncer(t, &pgtest.BouncerOptions{SearchPath: schema, PoolSize: 30})
	pool := bouncerPool(t, b, "exec", 20)
	d, err := NewWithOptions(pool, &Options{Schema: schema, ListenURL: pgtest.URL()})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	sum, err := demo.Run[pgx.Tx](context.Background(), d, payments.NewPostgresStore(pool), demo.Config{
		Payments: 200, Workers: 3, Concurrency: 6, Seed: 7, Timeout: 90 * time.Second,
		LeaseTTL: time.Second, ReconcileEvery: 300 * time.Millisecond, PendingAfter: 3 * time.Second,
		Crashes: 2, Pauses: 3, PSPErrorRate: 0.1, LostResponseRate: 0.05, SlowRate: 0.02, DeclineRate: 0.1,
		PSPTimeout: 300 * time.Millisecond, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("demo through PgBouncer: %v (summary %+v)", err, sum)
	}
	if !sum.OK() || sum.Settled != 200 || sum.DoubleCharges != 0 || sum.Lost != 0 || sum.PSPCharges != sum.Succeeded {
		t.Fatalf("summary not clean: %+v", sum)
	}
	if sum.Crashes < 1 || sum.LeaseExpiries == 0 || sum.FencedWrites == 0 {
		t.Fatalf("the faults did not happen: %+v", sum)
	}
}
