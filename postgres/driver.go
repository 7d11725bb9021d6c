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
//     settings (ListenInserts);
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
package postgres

import (
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var (
	_ driver.Driver[pgx.Tx] = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
)

// Driver is the Postgres backend. Create it with New; it is safe for
// concurrent use.
type Driver struct {
	pool       *pgxpool.Pool
	migrations []driver.Migration
}

// New returns a driver that runs its statements on pool. The pool's
// connections must resolve the leasehold tables (set search_path in the
// pool's RuntimeParams to use a schema other than public).
func New(pool *pgxpool.Pool) *Driver {
	return &Driver{pool: pool, migrations: mustMigrations()}
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
func (d *Driver) GetExecutor() driver.Executor { return &executor{db: d.pool} }

// UnwrapExecutor returns an executor that runs inside tx. It never commits
// or rolls tx back; its Begin opens a savepoint.
func (d *Driver) UnwrapExecutor(tx pgx.Tx) driver.Executor { return &executor{db: tx} }

// Migrations returns the schema migrations in version order.
func (d *Driver) Migrations() []driver.Migration {
	out := make([]driver.Migration, len(d.migrations))
	copy(out, d.migrations)
	return out
}
