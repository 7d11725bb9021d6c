package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/postgres"
	lhsqlite "github.com/leasehold/leasehold/sqlite"
)

// Schemas: one per engine, in the same database: <prefix>_raw,
// <prefix>_leasehold and <prefix>_river (prefix "bench" unless -schema-prefix).
var schemaSuffixes = []string{"raw", "leasehold", "river"}

// pgEnv holds one pool per engine schema, migrated.
type pgEnv struct {
	raw, leasehold, river *pgxpool.Pool
	app                   string // application_name of the leasehold pool
	noCheckpoint          bool   // CHECKPOINT was refused (checkpoint)
}

// checkpoint writes every dirty page out before a round is timed, so that a
// round neither pays for the pages of the rounds before it (the
// checkpointer's writes and the full-page images that follow a checkpoint
// that happens to start within it) nor leaves its own to the next: every
// round starts right after a checkpoint, and no timed one (5 minutes
// apart by default) falls within a round.
func (env *pgEnv) checkpoint(ctx context.Context) error {
	return checkpoint(ctx, env.leasehold, &env.noCheckpoint)
}

// checkpoint runs CHECKPOINT on pool. Without the right to (a role that is
// neither superuser nor in pg_checkpoint) it says so once, sets *refused
// and returns nil, and the rounds go on without it.
func checkpoint(ctx context.Context, pool *pgxpool.Pool, refused *bool) error {
	if *refused {
		return nil
	}
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			*refused = true
			fmt.Fprintf(os.Stderr, "# no CHECKPOINT before the rounds: %s\n", pgErr.Message)
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func setupPostgres(ctx context.Context, prefix string) (*pgEnv, error) {
	url := postgresURL()
	env := &pgEnv{app: prefix + "-leasehold"}
	var err error
	if env.raw, err = openPool(ctx, url, prefix+"_raw", prefix+"-raw"); err != nil {
		return nil, err
	}
	if env.leasehold, err = openPool(ctx, url, prefix+"_leasehold", env.app); err != nil {
		env.close()
		return nil, err
	}
	if env.river, err = openPool(ctx, url, prefix+"_river", prefix+"-river"); err != nil {
		env.close()
		return nil, err
	}
	for _, p := range []*pgxpool.Pool{env.raw, env.leasehold} {
		if _, err := migrate.New(postgres.New(p)).Up(ctx); err != nil {
			env.close()
			return nil, fmt.Errorf("migrate leasehold: %w", err)
		}
	}
	m, err := rivermigrate.New(riverpgxv5.New(env.river), nil)
	if err == nil {
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		env.close()
		return nil, fmt.Errorf("migrate river: %w", err)
	}
	return env, nil
}

func (env *pgEnv) close() {
	for _, p := range []*pgxpool.Pool{env.raw, env.leasehold, env.river} {
		if p != nil {
			p.Close()
		}
	}
}

// engineSpec are the tunables a mode passes to the engine constructors.
type engineSpec struct {
	workers int           // MaxWorkers of leasehold and river (bench settings)
	ttl     time.Duration // leasehold lease TTL; 0 = default
	hold    bool          // leasehold: insert held jobs
	// notifyWindow is the leasehold Postgres driver's NotifyWindow (0: its
	// default); leasehold-nowindow ignores it.
	notifyWindow time.Duration
	// keys is the number of distinct flow-control keys the jobs of
	// leasehold-keys are spread over; keyLimit is its queue's KeyLimit
	// (0: 1).
	keys, keyLimit int
	// dropIndexes are indexes of leasehold's SQLite schema dropped after
	// migrating (-drop-index), to measure their upkeep.
	dropIndexes []string
}

// riverBenchConfig is the configuration of River's own benchmark
// (cmd/river/riverbench): FetchCooldown 2 ms, FetchPollInterval 20 ms, 2,000
// workers on the default queue.
func riverBenchConfig(workers int) river.Config {
	return river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
	}
}

// pgEngine builds the named engine on Postgres. Names:
//
//	raw              the hand-written loop (4 loops, 1,000 per batch)
//	river            River with its bench settings
//	river-default    River's defaults (100 workers, as in its docs' examples)
//	river-2ms        River's defaults with a 2 ms fetch cooldown
//	leasehold        our defaults, MaxWorkers sized like River's bench
//	leasehold-default our defaults, 100 workers
//	leasehold-remote leasehold-default with jobs inserted by another client
//	                 on the same driver (as another process would insert):
//	                 the working client is woken by the notifications alone
//	leasehold-nowindow leasehold-default with every insert notifying
//	                 (postgres.Options.NotifyWindow -1: the behaviour before
//	                 the window), to measure what the window saves
func pgEngine(ctx context.Context, env *pgEnv, name string, spec engineSpec, h *hooks) (engine, error) {
	lhExec, rvExec := poolExec(env.leasehold), poolExec(env.river)
	lhReset := []string{"TRUNCATE leasehold_job, leasehold_attempt_log, leasehold_queue_key"}
	rvReset := []string{"TRUNCATE river_job"}
	switch name {
	case "raw":
		return newRawEngine(env.raw)
	case "river", "river-default", "river-2ms":
		cfg := riverBenchConfig(spec.workers)
		switch name {
		case "river-default":
			cfg = river.Config{Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}}
		case "river-2ms":
			cfg = river.Config{FetchCooldown: 2 * time.Millisecond, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 100}}}
		}
		return newRiverEngine(name, riverpgxv5.New(env.river), cfg, h, rvExec, rvReset, "ANALYZE river_job")
	case "leasehold", "leasehold-default", "leasehold-shared", "leasehold-nowindow", "leasehold-remote", "leasehold-keys":
		cfg := leasehold.Config{LeaseTTL: spec.ttl}
		if name == "leasehold" || name == "leasehold-shared" {
			cfg.Queues = map[string]leasehold.QueueConfig{"default": {MaxWorkers: spec.workers}}
		}
		if name == "leasehold-keys" {
			if spec.keys < 1 {
				return nil, fmt.Errorf("leasehold-keys needs -keys N (N ≥ 1)")
			}
			// The keyed claim: at most keyLimit running jobs per key.
			cfg.Queues = map[string]leasehold.QueueConfig{"default": {MaxWorkers: spec.workers, KeyLimit: max(1, spec.keyLimit)}}
		}
		if name == "leasehold-shared" {
			// The lease machinery on the shared pool instead of its
			// reserved connections (Config.ReservedConns), to measure what
			// the reserve costs or saves.
			cfg.ReservedConns = -1
		}
		opts := postgres.Options{NotifyWindow: spec.notifyWindow}
		if name == "leasehold-nowindow" {
			opts.NotifyWindow = -1
		}
		d, err := postgres.NewWithOptions(env.leasehold, &opts)
		if err != nil {
			return nil, err
		}
		t := newStmtTrace()
		e, err := newLeaseholdEngine(name, tracedPostgres{d, t}, cfg, h, lhExec, lhReset, "ANALYZE leasehold_job")
		if err != nil {
			return nil, err
		}
		e.hold, e.trace, e.remote = spec.hold, t, name == "leasehold-remote"
		if name == "leasehold-keys" {
			e.keys = spec.keys
		}
		return e, nil
	}
	return nil, fmt.Errorf("unknown engine %q", name)
}

// sqliteEngine builds the named engine on a fresh SQLite file in dir:
// leasehold (our Open: WAL, synchronous=FULL, busy timeout, BEGIN
// IMMEDIATE) or river (riversqlite on modernc.org/sqlite with the same
// pragmas and one connection, as River's driver documentation advises).
func sqliteEngine(ctx context.Context, dir, name string, spec engineSpec, h *hooks) (engine, func(), error) {
	path := filepath.Join(dir, name+".db")
	switch name {
	case "leasehold":
		d, db, err := lhsqlite.Open(path)
		if err != nil {
			return nil, nil, err
		}
		if _, err := migrate.New(d).Up(ctx); err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("migrate leasehold sqlite: %w", err)
		}
		for _, ix := range spec.dropIndexes {
			if _, err := db.ExecContext(ctx, `DROP INDEX "`+strings.ReplaceAll(strings.TrimSpace(ix), `"`, `""`)+`"`); err != nil {
				db.Close()
				return nil, nil, fmt.Errorf("-drop-index %s: %w", ix, err)
			}
		}
		cfg := leasehold.Config{Queues: map[string]leasehold.QueueConfig{"default": {MaxWorkers: spec.workers}}}
		t := newStmtTrace()
		e, err := newLeaseholdEngine(name, tracedSQLite{d, t}, cfg, h, dbExec(db),
			[]string{"DELETE FROM leasehold_job", "DELETE FROM leasehold_attempt"}, "ANALYZE")
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		e.trace = t
		return e, func() { db.Close() }, nil
	case "river":
		db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(1)
		drv := riversqlite.New(db)
		m, err := rivermigrate.New(drv, nil)
		if err == nil {
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		}
		if err != nil {
			db.Close()
			return nil, nil, fmt.Errorf("migrate river sqlite: %w", err)
		}
		e, err := newRiverEngine(name, drv, riverBenchConfig(spec.workers), h, dbExec(db),
			[]string{"DELETE FROM river_job"}, "ANALYZE")
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return e, func() { db.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown sqlite engine %q", name)
}

func dbExec(db *sql.DB) func(context.Context, string) error {
	return func(ctx context.Context, q string) error {
		_, err := db.ExecContext(ctx, q)
		return err
	}
}
