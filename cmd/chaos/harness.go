package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/internal/dburl"
	"github.com/leasehold/leasehold/migrate"
)

// env is what a run shares between its backend-independent parts.
type env struct {
	cfg        *config
	logf       func(string, ...any)
	exe        string
	workDir    string
	psp        *psp.Server
	cluster    *pgCluster
	ha         *haCluster // a Patroni cluster from scripts/ha-cluster.sh
	proxies    *netProxies
	workerURLs []string
	sqlDB      *sql.DB // the harness's own connection, for the checks
}

func run(ctx context.Context, cfg *config) int {
	start := time.Now()
	logf := func(format string, args ...any) {
		if cfg.verbose {
			fmt.Fprintf(os.Stderr, "chaos %6.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
		}
	}
	rep, err := runHarness(ctx, cfg, logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
	}
	if rep == nil {
		return 1
	}
	if cfg.json {
		out, _ := json.Marshal(rep)
		fmt.Println(string(out))
	} else if rep.HA != nil {
		rep.writeHALine(os.Stdout)
	} else {
		rep.writeTable(os.Stdout)
	}
	if err != nil || !rep.OK {
		return 1
	}
	return 0
}

func runHarness(ctx context.Context, cfg *config, logf func(string, ...any)) (*Report, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own binary: %w", err)
	}
	workDir, err := os.MkdirTemp("", "leasehold-chaos-")
	if err != nil {
		return nil, err
	}
	if cfg.keep {
		fmt.Fprintln(os.Stderr, "chaos: work directory", workDir)
	} else {
		defer os.RemoveAll(workDir)
	}
	server, err := psp.Start(psp.Config{
		Seed: cfg.seed, MinLatency: 20 * time.Millisecond, MaxLatency: 200 * time.Millisecond,
		DeclineRate: 0.05, ErrorRate: 0.03, LostResponseRate: 0.02, SlowRate: 0.01, SlowDelay: time.Second,
	})
	if err != nil {
		return nil, err
	}
	defer server.Close()
	e := &env{cfg: cfg, logf: logf, exe: exe, workDir: workDir, psp: server}

	var harnessURL string
	switch cfg.backend {
	case "sqlite":
		harnessURL = "sqlite:" + workDir + "/chaos.db"
		for range cfg.workers {
			e.workerURLs = append(e.workerURLs, harnessURL)
		}
	case "postgres":
		if cfg.haState != "" {
			if harnessURL, err = setupHA(ctx, e); err != nil {
				return nil, err
			}
			if e.ha != nil {
				defer dropHADatabase(e)
			}
			break
		}
		adminURL := cfg.pgURL
		if cfg.pgPrivate {
			e.cluster, err = startPGCluster(ctx, logf)
			if err != nil {
				return nil, fmt.Errorf("private cluster: %w", err)
			}
			defer e.cluster.remove()
			defer e.cluster.stop()
			adminURL = "postgres://postgres@" + e.cluster.addr() + "/postgres?sslmode=disable"
		}
		dbName := fmt.Sprintf("leasehold_chaos_%d_%d", os.Getpid(), cfg.seed)
		if err := pgAdmin(ctx, adminURL, "CREATE DATABASE "+dbName); err != nil {
			return nil, fmt.Errorf("create database: %w", err)
		}
		defer func() {
			if err := pgAdmin(context.Background(), adminURL, "DROP DATABASE IF EXISTS "+dbName+" WITH (FORCE)"); err != nil {
				fmt.Fprintln(os.Stderr, "chaos: drop database:", err)
			}
		}()
		u, err := url.Parse(adminURL)
		if err != nil {
			return nil, err
		}
		upstream := u.Host
		if u.Port() == "" {
			upstream += ":5432"
		}
		harnessURL = withDB(u, upstream, dbName, 8)
		e.proxies, err = startProxies(cfg.workers, upstream)
		if err != nil {
			return nil, err
		}
		defer e.proxies.stop()
		for i := range cfg.workers {
			e.workerURLs = append(e.workerURLs, withDB(u, e.proxies.addr(i), dbName, 6))
		}
	}

	db, err := dburl.Open(ctx, harnessURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if db.SQLite != nil {
		e.sqlDB = db.SQLiteDB
		return execute(ctx, e, db.SQLite, payments.NewSQLiteStore(db.SQLiteDB))
	}
	e.sqlDB = stdlib.OpenDBFromPool(db.Postgres.Pool())
	defer e.sqlDB.Close()
	return execute(ctx, e, db.Postgres, payments.NewPostgresStore(db.Postgres.Pool()))
}

// withDB returns u pointing at database name on host, with a pool size.
func withDB(u *url.URL, host, name string, pool int) string {
	v := *u
	v.Host, v.Path = host, "/"+name
	q := v.Query()
	q.Set("pool_max_conns", fmt.Sprint(pool))
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
	}
	v.RawQuery = q.Encode()
	return v.String()
}

func pgAdmin(ctx context.Context, adminURL, stmt string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, stmt)
	return err
}

// execute runs the workload under faults, drains, and checks.
func execute[TTx any](ctx context.Context, e *env, d driver.Driver[TTx], store *payments.Store[TTx]) (*Report, error) {
	cfg := e.cfg
	if _, err := migrate.New(d).Up(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	if err := store.Setup(ctx); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	inserter, err := leasehold.NewClient(d, &leasehold.Config{Logger: quiet})
	if err != nil {
		return nil, err
	}

	fl := newFleet(e.exe, workerConfig{
		pspURL: e.psp.URL(), ttl: cfg.ttl, pspTimeout: 500 * time.Millisecond, pendingAfter: 5 * time.Second,
		concurrency: cfg.concurrency, reportEvery: 200 * time.Millisecond,
	}, e.workerURLs, e.workDir)
	defer fl.stop(5 * time.Second) // on every path: no worker outlives the harness
	for slot := range cfg.workers {
		if _, err := fl.start(slot); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	e.logf("%d workers started on %s; faults: %s", cfg.workers, cfg.backend, strings.Join(cfg.faults, ","))

	tracker := newRecoveryTracker(e.sqlDB)
	trackCtx, stopTracking := context.WithCancel(ctx)
	defer stopTracking()
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); tracker.run(trackCtx, 100*time.Millisecond) }()

	tickCtx, stopTicker := context.WithCancel(ctx)
	defer stopTicker()
	bg.Add(1)
	go func() { defer bg.Done(); payments.RunReconcileTicker(tickCtx, inserter, time.Second, quiet) }()

	in := newInjector(cfg, fl, tracker, e.proxies, e.cluster, e.logf)
	in.ha = e.ha
	faultCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	faultsDone := make(chan struct{})
	go func() { defer close(faultsDone); in.run(faultCtx, start.Add(cfg.duration)) }()

	// Payments are created over the first 80% of the fault phase, as an
	// application's requests would arrive.
	runID := fmt.Sprintf("s%d", cfg.seed)
	f := &feeder{ids: make([]string, cfg.payments), acked: make([]atomic.Bool, cfg.payments), amount: make([]int64, cfg.payments),
		okAt: make([][2]int64, cfg.payments)}
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), 7))
	for i := range f.ids {
		f.ids[i] = fmt.Sprintf("pay_%s_%06d", runID, i+1)
		f.amount[i] = 100 + rng.Int64N(99_900)
	}
	f.create = func(ctx context.Context, i int) error {
		_, err := store.Create(ctx, inserter, payments.NewPayment{ID: f.ids[i], AmountCents: f.amount[i], Currency: "EUR"})
		return err
	}
	f.exists = func(ctx context.Context, i int) (bool, error) {
		_, err := store.Get(ctx, f.ids[i])
		if errors.Is(err, payments.ErrPaymentNotFound) {
			return false, nil
		}
		return err == nil, err
	}
	f.run(ctx, cfg.duration*8/10)
	e.logf("payments created: %d acknowledged of %d", f.ackedCount(), cfg.payments)
	sleepCtx(ctx, time.Until(start.Add(cfg.duration)))
	stopFaults()
	<-faultsDone

	// Heal: no toxic, no paused or dead worker; then drain.
	if e.proxies != nil {
		e.proxies.clear()
	}
	if err := fl.heal(); err != nil {
		return nil, err
	}
	e.logf("faults over (%d kills, %d pauses, %d db restarts, %d net faults); draining", in.kills.Load(), in.pauses.Load(), in.dbRestarts.Load(), in.netFaults())
	drainStart := time.Now()
	drained := drain(ctx, e.sqlDB, cfg.drain)
	drainTime := time.Since(drainStart)
	e.logf("drain %s after %s", map[bool]string{true: "complete", false: "INCOMPLETE"}[drained], drainTime.Round(time.Millisecond))

	stopTicker()
	fl.stop(10 * time.Second)
	in.wakeChecks.Wait()
	_ = tracker.poll(context.WithoutCancel(ctx))
	stopTracking()
	bg.Wait()

	checkCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	rep, err := check(checkCtx, e, f, fl, in, tracker)
	if err != nil {
		return nil, err
	}
	rep.ElapsedMS = time.Since(start).Milliseconds()
	rep.DrainMS = drainTime.Milliseconds()
	rep.Drained = drained
	rep.finish()
	if e.ha != nil {
		evs, err := readClaimLogs(e.workDir)
		if err != nil {
			return nil, fmt.Errorf("read claim logs: %w", err)
		}
		var okAt [][2]int64
		for i := range f.okAt {
			if f.okAt[i][1] != 0 {
				okAt = append(okAt, f.okAt[i])
			}
		}
		ids, err := jobIdentities(checkCtx, e.sqlDB)
		if err != nil {
			return nil, err
		}
		attempts, err := readAttempts(checkCtx, e.sqlDB)
		if err != nil {
			return nil, err
		}
		runs := func(after int64) []lostRun { return lostRuns(evs, ids, after) }
		haCheck(e, rep, in, analyzeClaims(evs, payments.ChargeKind), runs, foreignOutcomes(evs, attempts), rep.lostAcked, rep.orphanCharges, okAt)
	}
	return rep, nil
}

// drain waits until no payment is pending and every charge job is
// terminal, at most d. It reports whether that happened.
func drain(ctx context.Context, db *sql.DB, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var pending, open int64
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := db.QueryRowContext(qctx, `SELECT
			(SELECT COUNT(*) FROM payments WHERE status = 'pending'),
			(SELECT COUNT(*) FROM leasehold_job WHERE kind = '`+payments.ChargeKind+`' AND state NOT IN ('completed', 'discarded', 'cancelled'))`).Scan(&pending, &open)
		cancel()
		if err == nil && pending == 0 && open == 0 {
			return true
		}
		sleepCtx(ctx, 500*time.Millisecond)
	}
	return false
}

// feeder creates the payments, each with its charge job in one
// transaction, at an even pace, from a few goroutines.
type feeder struct {
	ids    []string
	amount []int64
	acked  []atomic.Bool // the creation was acknowledged (committed and known to be)
	// okAt holds, per payment, the start and end (Unix ns) of the creation
	// attempt that committed, when it was told so (not found afterwards).
	// Each element is written once, by the goroutine creating it, and read
	// after they are all done.
	okAt   [][2]int64
	create func(ctx context.Context, i int) error
	exists func(ctx context.Context, i int) (bool, error)
	failed atomic.Int64 // creations given up on: never acknowledged
}

func (f *feeder) run(ctx context.Context, over time.Duration) {
	interval := over / time.Duration(len(f.ids))
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(f.ids) {
					return
				}
				sleepCtx(ctx, time.Until(start.Add(time.Duration(i)*interval)))
				f.createOne(ctx, i)
			}
		}()
	}
	wg.Wait()
}

// createOne creates payment i, retrying while the database is failing.
// A creation whose commit outcome was unknown is acknowledged once the
// payment is found.
func (f *feeder) createOne(ctx context.Context, i int) {
	deadline := time.Now().Add(30 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		began := time.Now().UnixNano()
		err := f.create(cctx, i)
		if err == nil && f.okAt != nil {
			f.okAt[i] = [2]int64{began, time.Now().UnixNano()}
		}
		if err != nil {
			var ok bool
			ok, err = f.exists(cctx, i)
			if err == nil && !ok {
				err = errors.New("not created")
			}
		}
		cancel()
		if err == nil {
			f.acked[i].Store(true)
			return
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	f.failed.Add(1)
}

func (f *feeder) ackedCount() int {
	n := 0
	for i := range f.acked {
		if f.acked[i].Load() {
			n++
		}
	}
	return n
}
