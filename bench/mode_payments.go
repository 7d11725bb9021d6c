package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/postgres"
)

// runPayments times the payments path: each job's handler opens a
// transaction, inserts a ledger row, completes the job in that transaction
// and commits (raw: one transaction per job doing the same two writes;
// River: JobCompleteTx; leasehold: CompleteTx). Every engine gets the same
// pool size (-pool) and the same number of workers (-workers).
//
// The engines work in a database of their own, <prefix>_payments (created
// when missing), one after another, each on a pool opened for its round and
// closed after it: the growth of xact_commit + xact_rollback in
// pg_stat_database over the round, divided by the jobs, is the engine's
// transactions per job. After each round every job must have exactly one
// ledger row, or the run fails.
func runPayments(ctx context.Context, o *options, out io.Writer) error {
	if o.backend != "postgres" {
		return errors.New("payments: postgres only (it reads pg_stat_database)")
	}
	dbURL, err := paymentsDatabase(ctx, o.schemaPrefix)
	if err != nil {
		return err
	}
	names := o.engines
	if names == nil {
		names = []string{"raw", "river", "leasehold"}
	}
	pool := orDefault(o.pool, 20)
	jobs := orDefault(o.jobs, 20_000)
	rounds := orDefault(o.rounds, 1)
	pe := &paymentsEnv{url: dbURL, prefix: o.schemaPrefix, pool: pool, workers: o.workers}
	if err := pe.setup(ctx, names); err != nil {
		return err
	}
	all := make([]*series, len(names))
	xacts := make([][]float64, len(names))
	for i, n := range names {
		all[i] = &series{engine: n}
	}
	for r := range rounds {
		for i := range names {
			k := (i + r) % len(names)
			smp, perJob, err := pe.round(ctx, names[k], jobs)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", names[k], r+1, err)
			}
			fmt.Fprintf(os.Stderr, "  round %d %-18s %10.1f jobs/s %6.3f transactions/job\n", r+1, names[k], smp.value, perJob)
			all[k].samples = append(all[k].samples, smp)
			xacts[k] = append(xacts[k], perJob)
		}
	}
	fmt.Fprintf(out, "# payments: %d jobs per round, %d rounds, pool %d, %d workers per engine, engines alternating\n", jobs, rounds, pool, o.workers)
	printThroughput(out, fmt.Sprintf("payments-pool%d", pool), "jobs/s", all, pgServer)
	for i, n := range names {
		lo, med, hi := spread(xacts[i])
		fmt.Fprintf(out, "%-12s %-18s transactions/job min %.3f  median %.3f  max %.3f (pg_stat_database)\n", fmt.Sprintf("payments-pool%d-xacts", pool), n, lo, med, hi)
	}
	return nil
}

// paymentsDatabase creates the payments database when missing and returns
// its URL.
func paymentsDatabase(ctx context.Context, prefix string) (string, error) {
	name := prefix + "_payments"
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		return "", fmt.Errorf("payments: connect: %w", err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("payments: look for database %s: %w", name, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
			return "", fmt.Errorf("payments: create database %s: %w", name, err)
		}
	}
	u, err := url.Parse(postgresURL())
	if err != nil {
		return "", fmt.Errorf("payments: parse database URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropPaymentsDatabase drops what paymentsDatabase created.
func dropPaymentsDatabase(ctx context.Context, prefix string) error {
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{prefix + "_payments"}.Sanitize()+" WITH (FORCE)")
	return err
}

// paymentsEnv is the payments database and the settings shared by every
// engine.
type paymentsEnv struct {
	url, prefix   string
	pool, workers int
	noCheckpoint  bool // CHECKPOINT was refused (checkpoint)
}

// schema is the engine's schema in the payments database.
func (pe *paymentsEnv) schema(engine string) string { return pe.prefix + "_" + engine }

// open opens a pool of size n on the engine's schema.
func (pe *paymentsEnv) open(ctx context.Context, engine string, n int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(pe.url)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(n)
	cfg.ConnConfig.RuntimeParams["search_path"] = pe.schema(engine)
	cfg.ConnConfig.RuntimeParams["application_name"] = pe.prefix + "-payments-" + engine
	return pgxpool.NewWithConfig(ctx, cfg)
}

// setup creates and migrates every engine's schema and ledger table.
func (pe *paymentsEnv) setup(ctx context.Context, names []string) error {
	for _, n := range names {
		if n != "raw" && n != "river" && n != "leasehold" {
			return fmt.Errorf("payments: unknown engine %q (raw, river, leasehold)", n)
		}
		admin, err := pe.open(ctx, n, 2)
		if err != nil {
			return err
		}
		err = func() error {
			if _, err := admin.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pe.schema(n)); err != nil {
				return err
			}
			// No key: the check after the round counts duplicates.
			if _, err := admin.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_ledger (job_id bigint NOT NULL, amount bigint NOT NULL)"); err != nil {
				return err
			}
			if n == "river" {
				m, err := rivermigrate.New(riverpgxv5.New(admin), nil)
				if err == nil {
					_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
				}
				return err
			}
			_, err := migrate.New(postgres.New(admin)).Up(ctx)
			return err
		}()
		admin.Close()
		if err != nil {
			return fmt.Errorf("payments: set up %s: %w", n, err)
		}
	}
	return nil
}

// round empties the engine's tables, inserts n jobs, and times the engine
// working them on a fresh pool; it returns jobs/s and transactions per job.
func (pe *paymentsEnv) round(ctx context.Context, engine string, n int) (smp sample, perJob float64, err error) {
	admin, err := pe.open(ctx, engine, 2)
	if err != nil {
		return sample{}, 0, err
	}
	if err := pe.prepare(ctx, admin, engine, n); err != nil {
		admin.Close()
		return sample{}, 0, err
	}
	// As the drain does (pgEnv.checkpoint): no round pays for another's pages.
	if err := checkpoint(ctx, admin, &pe.noCheckpoint); err != nil {
		admin.Close()
		return sample{}, 0, err
	}
	admin.Close()
	before, err := pe.xacts(ctx)
	if err != nil {
		return sample{}, 0, err
	}
	pool, err := pe.open(ctx, engine, pe.pool)
	if err != nil {
		return sample{}, 0, err
	}
	if err := establish(ctx, pool); err != nil {
		pool.Close()
		return sample{}, 0, err
	}
	var run paymentsRun
	switch engine {
	case "raw":
		run = &rawPayments{pool: pool, workers: pe.workers}
	case "river":
		run = &riverPayments{pool: pool, workers: pe.workers}
	default:
		run = &leaseholdPayments{pool: pool, workers: pe.workers}
	}
	var (
		elapsed time.Duration
		u0, u1  resUsage
	)
	withLabel(ctx, engine, func(ctx context.Context) {
		u0 = takeUsage(pgServer)
		start := time.Now()
		if err = run.start(ctx); err != nil {
			return
		}
		err = waitFor(ctx, 60*time.Second+time.Duration(n)*5*time.Millisecond, func() bool { return run.committed() >= int64(n) || run.failed() != nil })
		elapsed = time.Since(start)
		u1 = takeUsage(pgServer)
		if err == nil {
			err = run.failed()
		}
	})
	if stopErr := run.stop(ctx); err == nil {
		err = stopErr
	}
	pool.Close()
	if err != nil {
		return sample{}, 0, err
	}
	after, err := pe.xacts(ctx)
	if err != nil {
		return sample{}, 0, err
	}
	if err := pe.checkLedger(ctx, engine, n); err != nil {
		return sample{}, 0, err
	}
	return makeSample(float64(n)/elapsed.Seconds(), u0, u1, n, 0), float64(after-before) / float64(n), nil
}

// establish opens every connection of pool before a round is timed, so
// that the round's server CPU and page faults leave out the start of the
// backends every engine gets alike (a new backend faults in a few
// thousand pages). What an engine opens itself is counted: leasehold's
// reserved connections and its listener.
func establish(ctx context.Context, pool *pgxpool.Pool) error {
	conns := make([]*pgxpool.Conn, 0, pool.Config().MaxConns)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range cap(conns) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("payments: open the pool's connections: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// prepare empties the engine's tables and inserts n jobs, untimed.
func (pe *paymentsEnv) prepare(ctx context.Context, admin *pgxpool.Pool, engine string, n int) error {
	reset := "TRUNCATE bench_ledger, leasehold_job, leasehold_attempt_log"
	if engine == "river" {
		reset = "TRUNCATE bench_ledger, river_job"
	}
	if _, err := admin.Exec(ctx, reset); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	const batch = 10_000
	args := makeArgs(n)
	if engine == "river" {
		c, err := river.NewClient(riverpgxv5.New(admin), &river.Config{Logger: benchLogger()})
		if err != nil {
			return err
		}
		for i := 0; i < n; i += batch {
			params := make([]river.InsertManyParams, 0, batch)
			for _, a := range args[i:min(n, i+batch)] {
				params = append(params, river.InsertManyParams{Args: a})
			}
			if _, err := c.InsertManyFast(ctx, params); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		_, err = admin.Exec(ctx, "ANALYZE river_job")
		return err
	}
	c, err := leasehold.NewClient(postgres.New(admin), &leasehold.Config{Logger: benchLogger()})
	if err != nil {
		return err
	}
	for i := 0; i < n; i += batch {
		params := make([]leasehold.InsertManyParams, 0, batch)
		for _, a := range args[i:min(n, i+batch)] {
			params = append(params, leasehold.InsertManyParams{Args: a})
		}
		if _, err := c.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	_, err = admin.Exec(ctx, "ANALYZE leasehold_job")
	return err
}

// xacts returns the payments database's committed and rolled-back
// transactions so far. Backends report them when they end: the engines'
// pools are closed before it is read, and it waits for the count to settle
// (a backend's last report lands shortly after its connection closes).
func (pe *paymentsEnv) xacts(ctx context.Context) (int64, error) {
	conn, err := pgx.Connect(ctx, postgresURL())
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	name := pe.prefix + "_payments"
	last := int64(-1)
	for range 50 {
		var n int64
		if err := conn.QueryRow(ctx, "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = $1", name).Scan(&n); err != nil {
			return 0, fmt.Errorf("read pg_stat_database: %w", err)
		}
		if n == last {
			return n, nil
		}
		last = n
		time.Sleep(200 * time.Millisecond)
		if _, err := conn.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// checkLedger fails unless every job of the round has exactly one ledger row.
func (pe *paymentsEnv) checkLedger(ctx context.Context, engine string, n int) error {
	admin, err := pe.open(ctx, engine, 1)
	if err != nil {
		return err
	}
	defer admin.Close()
	jobTable := "leasehold_job"
	if engine == "river" {
		jobTable = "river_job"
	}
	var rows, distinct, orphans int64
	err = admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT l.job_id), count(*) FILTER (WHERE j.id IS NULL)
		FROM bench_ledger l LEFT JOIN `+jobTable+` j ON j.id = l.job_id`).Scan(&rows, &distinct, &orphans)
	if err != nil {
		return fmt.Errorf("check ledger: %w", err)
	}
	if rows != int64(n) || distinct != int64(n) || orphans != 0 {
		return fmt.Errorf("ledger check failed: %d rows for %d distinct jobs (%d of no job), want exactly one row for each of %d jobs", rows, distinct, orphans, n)
	}
	return nil
}

// paymentsRun is one engine working the payments backlog.
type paymentsRun interface {
	start(ctx context.Context) error
	// committed counts the handlers' transactions that committed.
	committed() int64
	// failed returns the first handler or loop error, if any.
	failed() error
	stop(ctx context.Context) error
}

// runState is what every paymentsRun keeps: commits and the first error.
type runState struct {
	commits atomic.Int64
	errMu   sync.Mutex
	err     error
}

func (s *runState) committed() int64 { return s.commits.Load() }

func (s *runState) failed() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *runState) fail(err error) {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	if s.err == nil {
		s.err = err
	}
}

// ledgerInsert is the business write of every engine's handler.
const ledgerInsert = `INSERT INTO bench_ledger (job_id, amount) VALUES ($1, $2)`

// rawCompleteOne completes one job in the handler's transaction, fenced by
// its token and lease.
const rawCompleteOne = `
UPDATE leasehold_job SET state = 'completed', finalized_at = now()
WHERE id = $1 AND lease_token = $2 AND state = 'running' AND lease_until > now()`

// rawPayments is the hand-written loop: one claim loop hands jobs to the
// workers as they free up; each worker does one transaction per job (the
// ledger insert and the fenced completion).
type rawPayments struct {
	runState
	pool    *pgxpool.Pool
	workers int
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func (e *rawPayments) start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	type job struct{ id, token int64 }
	jobs := make(chan job, e.workers)
	free := make(chan struct{}, e.workers)
	for range e.workers {
		free <- struct{}{}
	}
	for range e.workers {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			for j := range jobs {
				if err := e.work(ctx, j.id, j.token); err != nil && ctx.Err() == nil {
					e.fail(err)
				}
				free <- struct{}{}
			}
		}()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(jobs)
		ids, tokens := make([]int64, 0, 1000), make([]int64, 0, 1000)
		for ctx.Err() == nil {
			// Claim as many as there are free workers (at least one).
			n := 0
			select {
			case <-free:
				n = 1
			case <-ctx.Done():
				return
			}
		more:
			for n < 1000 {
				select {
				case <-free:
					n++
				default:
					break more
				}
			}
			var err error
			ids, tokens, err = pgRaw{e.pool}.claim(ctx, "raw-payments", n, ids[:0], tokens[:0])
			if err != nil {
				if ctx.Err() == nil {
					e.fail(fmt.Errorf("raw: claim: %w", err))
				}
				return
			}
			for i := range ids {
				jobs <- job{ids[i], tokens[i]}
			}
			for range n - len(ids) {
				free <- struct{}{}
			}
			if len(ids) == 0 {
				sleepCtx(ctx, time.Millisecond)
			}
		}
	}()
	return nil
}

func (e *rawPayments) work(ctx context.Context, id, token int64) error {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, ledgerInsert, id, 100); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, rawCompleteOne, id, token)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("raw: job %d token %d: completion refused", id, token)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	e.commits.Add(1)
	return nil
}

func (e *rawPayments) stop(context.Context) error {
	if e.cancel != nil {
		e.cancel()
		e.wg.Wait()
	}
	return nil
}

// riverPayments is River with its bench settings and JobCompleteTx.
type riverPayments struct {
	runState
	pool    *pgxpool.Pool
	workers int
	client  *river.Client[pgx.Tx]
}

// riverPaymentsWorker completes its job with JobCompleteTx.
type riverPaymentsWorker struct {
	river.WorkerDefaults[benchArgs]
	e *riverPayments
}

func (w *riverPaymentsWorker) Work(ctx context.Context, j *river.Job[benchArgs]) error {
	err := pgx.BeginFunc(ctx, w.e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, ledgerInsert, j.ID, 100); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, j)
		return err
	})
	if err != nil {
		w.e.fail(fmt.Errorf("river: job %d: %w", j.ID, err))
		return err
	}
	w.e.commits.Add(1)
	return nil
}

func (e *riverPayments) start(ctx context.Context) error {
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverPaymentsWorker{e: e})
	cfg := riverBenchConfig(e.workers)
	cfg.Workers = workers
	cfg.Logger = benchLogger()
	c, err := river.NewClient(riverpgxv5.New(e.pool), &cfg)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	e.client = c
	return nil
}

func (e *riverPayments) stop(ctx context.Context) error {
	if e.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return e.client.Stop(ctx)
}

// leaseholdPayments is our client, defaults but MaxWorkers, and CompleteTx.
type leaseholdPayments struct {
	runState
	pool    *pgxpool.Pool
	workers int
	client  *leasehold.Client[pgx.Tx]
	trace   *stmtTrace
	started time.Time
}

func (e *leaseholdPayments) start(ctx context.Context) error {
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[benchArgs](func(ctx context.Context, j *leasehold.Job[benchArgs]) error {
		err := pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, ledgerInsert, j.ID, 100); err != nil {
				return err
			}
			return e.client.CompleteTx(ctx, tx, j.JobRow)
		})
		if err != nil {
			e.fail(fmt.Errorf("leasehold: job %d: %w", j.ID, err))
			return err
		}
		e.commits.Add(1)
		return nil
	}))
	e.trace, e.started = newStmtTrace(), time.Now()
	c, err := leasehold.NewClient(tracedPostgres{postgres.New(e.pool), e.trace}, &leasehold.Config{
		Logger:  benchLogger(),
		Workers: workers,
		Queues:  map[string]leasehold.QueueConfig{"default": {MaxWorkers: e.workers}},
	})
	if err != nil {
		return err
	}
	e.client = c
	return c.Start(ctx)
}

func (e *leaseholdPayments) stop(ctx context.Context) error {
	if e.client == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := e.client.Stop(ctx)
	e.trace.print(os.Stderr, "leasehold", time.Since(e.started))
	return err
}
