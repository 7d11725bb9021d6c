// Package postgres is the leasehold backend for PostgreSQL, built on pgx v5.
//
// Claims use FOR UPDATE SKIP LOCKED so concurrent workers never block on each
// other; every lease-bearing write is one conditional statement checked
// against the database clock; inserts wake listeners through LISTEN/NOTIFY
// (see Driver.ListenInserts).
//
// # Pool sizing
//
// The pool given to New is the application's: handlers' own transactions
// (CompleteTx, InsertTx, business writes), inserts, reads and operator
// actions run on it. Leasehold itself opens, per working client (one with
// workers, between Start and Stop):
//
//   - 1 listener connection, outside the pool, from the pool's connection
//     settings or Options.ListenURL (none with Options.DisableListen);
//   - DefaultReservedConns (3) connections in a pool of their own, built from
//     the pool's configuration with the same connection settings and hooks
//     (OpenReserved; leasehold.Config.ReservedConns sets the number, a
//     negative value reserves none). The lease machinery runs on them: claims
//     (one claim loop per queue), the batched lease renewals and outcome
//     writes (at most 4 outcome statements at once, never beside a renewal),
//     the expirer and the cancellation poll. Handlers holding every
//     connection of the application's pool cannot delay a renewal.
//
// So a process running one client holds up to 4 connections beyond its pool's
// MaxConns; count them against max_connections (or the pooler's limits) for
// every replica. pgxpool's default MaxConns is the greater of 4 and the
// number of CPUs, shared by everything else: size it for the handlers that
// hold a transaction at once (up to the sum of the queues' MaxWorkers, if
// every handler opens one), plus the application's own use and a few for
// inserts and reads (pool_max_conns in the URL, or pgxpool.Config.MaxConns).
// A handler that waits for a connection keeps its lease: its renewals do not
// share the pool. Leader elections and pruning (one statement at a time per
// client) stay on the application's pool.
//
// Behind PgBouncer the reserved pool connects through the pooler like the
// application's pool, and a server connection is what a handler's open
// transaction holds: size the pooler's pool_size (per database and user) for
// the application's MaxConns plus the reserved connections of every client
// that shares it, or renewals wait in the pooler's queue behind the
// handlers.
//
// # PgBouncer
//
// The driver works behind PgBouncer in transaction mode (pool_mode =
// transaction); the tests run the client conformance tests and the payments
// demo through PgBouncer 1.18 (TestPgBouncer*). What it needs:
//
//   - PgBouncer before 1.21 keeps no prepared statements across
//     transactions, and pgx's default exec mode (cache_statement) prepares
//     them: add default_query_exec_mode=exec to the pool's URL (or set
//     ConnConfig.DefaultQueryExecMode). simple_protocol and cache_describe
//     also work; cache_statement and describe_exec do not. PgBouncer 1.21
//     and newer track prepared statements when pgbouncer.ini sets
//     max_prepared_statements (e.g. 200), and the default mode then works
//     (not tested here, where 1.18 is what the distribution ships). Every
//     mode works on a direct connection.
//   - A schema: PgBouncer refuses the search_path and options startup
//     parameters, and a SET would last only for the server connection it
//     lent. Use NewWithOptions with Options.Schema, which names the schema
//     in every statement the driver runs, migrations included.
//   - LISTEN needs a session of its own, which a transaction-mode pooler does
//     not give: notifications are lost silently. Set Options.ListenURL to a
//     direct connection to the same database, or Options.DisableListen to
//     poll only. A client that listens through the pooler anyway warns once
//     that insert notifications are not arriving, counts it in
//     leasehold.Stats.NotificationsSilent, and keeps finding jobs by polling
//     (Config.PollInterval).
//   - Behind a pooler the session's process ID is the pooler's, so a client
//     cannot recognise the notifications of its own inserts; the driver
//     detects this once (the session's ID is not pg_backend_pid()), logs it
//     at Info, and each insert then costs its client one extra, empty claim.
//
// For example:
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@pgbouncer:6432/app?default_query_exec_mode=exec")
//	d, err := postgres.NewWithOptions(pool, &postgres.Options{
//		Schema:    "jobs",
//		ListenURL: "postgres://app@db:5432/app",
//	})
package postgres

import (
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var (
	_ driver.Driver[pgx.Tx] = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
	_ driver.NotifierSwitch = (*Driver)(nil)
)

// Driver is the Postgres backend. Create it with New or NewWithOptions; it
// is safe for concurrent use.
type Driver struct {
	pool       *pgxpool.Pool
	migrations []driver.Migration
	// q names the schema in every statement; nil without Options.Schema.
	q *qualifier
	// channel is the insert notification channel (insertChannelFor).
	channel string
	// listenConfig is the listener's connection; nil: the pool's.
	listenConfig *pgx.ConnConfig
	// noListen turns insert notifications off (Options.DisableListen).
	noListen bool
	logger   *slog.Logger
	// pooler caches whether the pool's connections go through a connection
	// pooler (behindPooler): 0 not known yet, poolerNo or poolerYes.
	pooler atomic.Int32
	// notices coalesces the notifications of the inserts the driver
	// commits itself (Options.NotifyWindow); nil: every insert notifies.
	notices *noticeLimiter
}

// Options configures a driver made by NewWithOptions. The zero value is the
// driver New makes.
type Options struct {
	// Schema, when set, is the schema that holds the leasehold tables: every
	// statement the driver runs names it, migrations included (they create
	// the tables there; the schema must exist), so the connections need no
	// search_path. This is the way to use a schema through PgBouncer, which
	// refuses the search_path and options startup parameters. Empty: the
	// tables are found on the connections' search_path. Insert
	// notifications of a schema go on a channel of its own
	// ("schema.leasehold_insert"), so clients of other schemas in the same
	// database are not woken by them; clients of one schema must all set it
	// the same way to hear each other.
	Schema string
	// ListenURL, when set, is the connection string of the connection the
	// driver listens for insert notifications on (ListenInserts), instead of
	// the pool's connection settings. LISTEN needs a session: behind a
	// transaction-mode pooler, point it at the database directly (the same
	// database as the pool). The pool's application_name applies unless the
	// URL sets one.
	ListenURL string
	// DisableListen turns insert notifications off: the driver then reports
	// that it does not notify (driver.NotifierOf), and clients find other
	// clients' jobs by polling (leasehold.Config.PollInterval). Inserts still
	// send their notifications, for clients whose drivers listen.
	DisableListen bool
	// NotifyWindow is the shortest time between two insert notifications of
	// one queue sent by the inserts this driver commits itself (Insert,
	// InsertMany and InsertManyFast outside a caller's transaction, for every
	// client on the driver). Inserts inside it send none; one notification at
	// its end announces them (carried by the next insert, or sent on its own
	// when none comes), so listeners hear of every job within about the
	// window. Inserts in a caller's transaction (InsertTx) each notify at
	// their commit. Zero: DefaultNotifyWindow (2 ms). Negative: every insert
	// notifies, as before the window existed. Postgres commits notifying
	// transactions one at a time, so at high insert rates a window keeps
	// inserts from queueing behind each other.
	NotifyWindow time.Duration
	// Logger receives the driver's logs (one line at Info when the pool is
	// found to go through a connection pooler, a Warn when a trailing
	// insert notification fails); default none.
	Logger *slog.Logger
}

// New returns a driver that runs its statements on pool. The pool's
// connections must resolve the leasehold tables (set search_path in the
// pool's RuntimeParams to use a schema other than public, or use
// NewWithOptions with Options.Schema, which also works through PgBouncer).
func New(pool *pgxpool.Pool) *Driver {
	d, err := NewWithOptions(pool, nil)
	if err != nil {
		panic(fmt.Sprintf("postgres: the zero Options are invalid: %v", err)) // unreachable
	}
	return d
}

// NewWithOptions returns a driver that runs its statements on pool,
// configured by opts (nil: the defaults, as New). It fails on an invalid
// schema name or ListenURL.
func NewWithOptions(pool *pgxpool.Pool, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	d := &Driver{pool: pool, migrations: mustMigrations(), channel: insertChannel, noListen: o.DisableListen, logger: o.Logger}
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	window := o.NotifyWindow
	if window == 0 {
		window = DefaultNotifyWindow
	}
	d.notices = newNoticeLimiter(window, d.sendTrailingNotice)
	if o.Schema != "" {
		q, err := newQualifier(o.Schema, d.migrations)
		if err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		d.q, d.channel = q, q.channel
	}
	if o.ListenURL != "" {
		cfg, err := pgx.ParseConfig(o.ListenURL)
		if err != nil {
			return nil, fmt.Errorf("postgres: parse ListenURL: %w", err)
		}
		if _, set := cfg.RuntimeParams["application_name"]; !set {
			if name, ok := pool.Config().ConnConfig.RuntimeParams["application_name"]; ok {
				cfg.RuntimeParams["application_name"] = name
			}
		}
		d.listenConfig = cfg
	}
	return d, nil
}

// mustMigrations parses the embedded migration files. They are fixed at
// compile time, so a parse error is a broken build, not a runtime condition.
func mustMigrations() []driver.Migration {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("postgres: open embedded migrations: %v", err))
	}
	ms, err := driver.MigrationsFromFS(sub)
	if err != nil {
		panic(fmt.Sprintf("postgres: parse embedded migrations: %v", err))
	}
	return ms
}

// Pool returns the pool the driver was created with.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Name returns "postgres".
func (d *Driver) Name() string { return "postgres" }

// GetExecutor returns an executor on the driver's pool.
func (d *Driver) GetExecutor() driver.Executor {
	return &executor{db: d.q.wrap(d.pool), drv: d}
}

// UnwrapExecutor returns an executor that runs inside tx. It never commits
// or rolls tx back; its Begin opens a savepoint.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) driver.Executor {
	return &executor{db: d.q.wrapTx(tx)}
}

// Migrations returns the schema migrations in version order. With
// Options.Schema each begins with SET LOCAL search_path to the schema.
func (d *Driver) Migrations() []driver.Migration {
	out := make([]driver.Migration, len(d.migrations))
	copy(out, d.migrations)
	return d.q.migrations(out)
}
