// Package postgres is the leasehold backend for PostgreSQL, built on pgx v5.
//
// Claims use FOR UPDATE SKIP LOCKED so concurrent workers never block on each
// other; every lease-bearing write is one conditional statement checked
// against the database clock; inserts wake listeners through LISTEN/NOTIFY
// (see Driver.ListenInserts).
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
