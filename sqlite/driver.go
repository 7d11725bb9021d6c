// Package sqlite is the leasehold backend for SQLite, the embedded default: no
// server, one database file, using the pure-Go driver modernc.org/sqlite.
//
// SQLite has a single writer. Every write this driver makes runs in a
// transaction that takes the write lock at once (BEGIN IMMEDIATE, from the
// DSN's _txlock=immediate), so a claim or a finish is never a read upgraded
// to a write, and two claimers can never lease the same job. Within one process the driver also queues its own write
// transactions on a lock, so many goroutines wait in Go rather than spin in
// SQLite's busy handler; other processes on the same file are held off by
// busy_timeout.
//
// A working client pins DefaultReservedConns (2) connections of the *sql.DB
// from Start to Stop for its lease machinery (OpenReserved), and one for its
// wake-up listener (ListenInserts), so that handlers
// holding the others, idle or in read transactions, cannot delay a renewal;
// they count against SetMaxOpenConns. A handler holding a write transaction
// holds the single write lock, and every writer, renewals included, waits
// for it: keep handlers' write transactions short.
//
// SQLite cannot push notifications; the driver implements driver.Notifier
// with wake-up rows instead (migration 6, leasehold_wakeup, one row per
// queue). A write transaction that inserts available jobs into a queue, or
// resumes it, bumps the queue's row once, whatever the number of jobs: one
// upsert of a row of a few hundred bytes more per insert transaction, under
// the write lock it holds anyway. A listening client (ListenInserts) pins
// one more connection of the pool and reads PRAGMA data_version on it every
// 5 ms, which changes only when another connection commits: an idle client
// on an idle database reads 200 pragmas a second and no table. When anyone
// has committed since, it also reads the wake-up table (one row per queue)
// and wakes the queues whose row moved, so jobs inserted by another process
// start within milliseconds instead of at the next poll. Each notice names
// the inserting transaction (driver.SenderTracker), so a client skips its
// own inserts, which it woke itself already. Jobs that become available
// because their schedule arrives are not inserts: they are found by the
// poll (leasehold.Config.PollInterval), as on every backend.
//
// Times are stored as INTEGER microseconds since the Unix epoch and are
// computed by SQL on the database clock (the clock of the process running
// SQLite, at millisecond resolution).
package sqlite

import (
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/leasehold/leasehold/driver"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

var _ driver.Driver[*sql.Tx] = (*Driver)(nil)

// Driver is the SQLite backend. Its transaction type is *sql.Tx. Create it
// with New or Open; it is safe for concurrent use.
type Driver struct {
	db *sql.DB
	// writeLock serialises this driver's own write transactions in process:
	// a buffered channel of one, so waiting can respect a context.
	writeLock chan struct{}
	stmts     *stmtCache
}

// New returns a driver on db, a database opened with the driver name
// "sqlite" (modernc.org/sqlite). Open it with the DSN that DSN returns, or
// one with the same settings: transactions must take the write lock at once
// (_txlock=immediate), or a write transaction that has read first fails with
// SQLITE_BUSY when another process wrote in between; and the database should
// be in WAL mode with a busy timeout.
func New(db *sql.DB) *Driver {
	return &Driver{db: db, writeLock: make(chan struct{}, 1), stmts: &stmtCache{db: db}}
}

// txQuerier runs the driver's cached statements inside tx.
func (d *Driver) txQuerier(tx *sql.Tx) querier { return cachedQuerier{cache: d.stmts, tx: tx} }

// Name returns "sqlite".
func (d *Driver) Name() string { return "sqlite" }

// DB returns the database the driver runs on.
func (d *Driver) DB() *sql.DB { return d.db }

// GetExecutor returns an executor on the database pool. Each of its write
// methods runs in its own BEGIN IMMEDIATE transaction.
func (d *Driver) GetExecutor() driver.Executor {
	return &executor{d: d, q: cachedQuerier{cache: d.stmts}, raw: d.db, onPool: true}
}

// UnwrapExecutor returns an executor that runs inside tx. It never commits or
// rolls tx back; a write method of several statements runs inside a savepoint
// so that it is atomic within tx.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) driver.Executor {
	return &executor{d: d, q: d.txQuerier(tx), raw: tx}
}

// Migrations returns the SQLite schema migrations in version order.
func (d *Driver) Migrations() []driver.Migration {
	ms, err := migrations()
	if err != nil {
		// The files are embedded at build time; a bad one is a bug the
		// package's tests catch, like a template that fails to parse.
		panic(err)
	}
	return ms
}

func migrations() ([]driver.Migration, error) {
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("open embedded migrations: %w", err)
	}
	return driver.MigrationsFromFS(sub)
}
