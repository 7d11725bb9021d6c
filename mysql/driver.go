// Package mysql is the leasehold backend for MySQL 8 and MariaDB 10.6 or
// newer, on database/sql with github.com/go-sql-driver/mysql.
//
// Neither server has UPDATE ... RETURNING (MariaDB only from 11), so every
// lease-bearing write is a short transaction: a locking read (SELECT ... FOR
// UPDATE, with SKIP LOCKED for claims and expiries) that applies the whole
// condition — fencing token and lease owner, state running, lease unexpired
// on the database clock — and locks the rows it returns, then the UPDATE of exactly those
// rows, and the attempt rows of a finish. No other transaction can
// change a locked row in between, so the condition still holds when the row
// is written: the write is as conditional as Postgres's single statement.
// Concurrent claimers skip each other's locked rows instead of waiting. A
// claim's locking read returns the whole rows and the lease the UPDATE then
// writes (the same expressions on the same locked rows), so nothing is read
// after it.
//
// The driver runs its own transactions with plain statements on a
// connection it holds, not database/sql's Tx: the first statement goes
// with SET TRANSACTION ISOLATION LEVEL READ COMMITTED and START TRANSACTION
// in front of it, the last ones with COMMIT after them, in one round trip
// each. A claim is then three round trips (a read of whether the queue has
// a claimable job, the locking read, the UPDATE), a renewal or a finish of
// any number of leases two. A client sends its outcome batches with the
// queue's next claim (driver.FinishClaimer): the finish and the claim in
// one transaction of three round trips, several claims of a queue in
// flight at once. SET TRANSACTION without SESSION sets the level
// of that one transaction: the session, and whoever uses the pooled
// connection after the driver, keep their own.
//
// All lease arithmetic runs on the database clock, UTC_TIMESTAMP(6), whatever
// the session time zone; times are DATETIME(6) columns holding UTC. The
// driver reads and writes them itself, so it does not depend on the DSN's
// parseTime or loc.
//
// A working client pins DefaultReservedConns (2) connections of the *sql.DB
// from Start to Stop for its lease machinery (OpenReserved): claims,
// renewals, outcome writes, expiries, the cancellation poll; and one for its
// wake-up listener (ListenInserts). They count against SetMaxOpenConns: set
// it to the handlers that hold a transaction at once, plus the
// application's own use, plus these three.
//
// MySQL and MariaDB cannot push notifications; the driver implements
// driver.Notifier with wake-up rows instead (migration 6, leasehold_wakeup).
// A transaction that inserts available jobs into a queue, or resumes it,
// bumps one row of the queue once, whatever the number of jobs: one more
// INSERT ... ON DUPLICATE KEY UPDATE round trip per insert transaction. The
// row is the queue's slot CONNECTION_ID() % 16, and its lock is held until
// the insert commits, so concurrent inserts into one queue wait for each
// other only when their connections share a slot. A listening client pins
// one connection and checks the whole table (at most 16 rows per queue, by
// primary key) every 10 ms: on MariaDB in a statement that waits on the
// server and returns at the first bump or after 250 ms (four round trips a
// second per idle client), on MySQL by reading it from the client (100
// small reads a second). It wakes the queues whose rows moved, so jobs
// inserted by another process start within milliseconds instead of at the
// next poll. Each notice names the inserting transaction
// (driver.SenderTracker), so a client skips its own inserts, which it woke
// itself already. Jobs that become available because their schedule
// arrives are not inserts: they are found by the poll
// (leasehold.Config.PollInterval), as on every backend.
//
// # What the server and the connection need
//
//   - MySQL 8.0.16 or newer, or MariaDB 10.6 or newer: SKIP LOCKED, JSON_TABLE
//     and enforced CHECK constraints. The tables use InnoDB. The SQL keeps to
//     what MySQL 8 shares with MariaDB; DEVELOPERS.md says which servers the
//     tests run on. Reverting migration 3 needs MySQL 8.0.19 (ALTER TABLE ...
//     DROP CONSTRAINT).
//   - multiStatements=true in the DSN, for Exec, the migrations and
//     LimitLock, which send several statements at once. DSN and Open set it,
//     with interpolateParams=true, which sends each statement in one round
//     trip instead of three. The driver's own transactions need both to
//     begin and commit along with their statements; on a *sql.DB without
//     them (the driver tries once, with DO ?; DO ?) they are database/sql
//     transactions instead, three round trips more each.
//   - Nothing of the binary log. SKIP LOCKED appears only in plain SELECTs,
//     which are never logged; every logged write names its rows by ID (no
//     LIMIT, no SKIP LOCKED inside an UPDATE or DELETE), so it is
//     deterministic under statement-based replication as well. ROW or MIXED
//     (the defaults of MySQL 8 and MariaDB) is still the safer choice for a
//     replicated queue.
//   - Any isolation level the server or the session defaults to: the driver
//     starts its own transactions as READ COMMITTED, so a claim takes no gap
//     locks that would hold up inserts; users' transactions and sessions
//     keep their own level. A limited
//     claim relies on it: after LimitLock, the running count reads the
//     commits of the previous lock holder, which a REPEATABLE READ snapshot
//     taken earlier would not show. LimitLock therefore runs only in a
//     transaction from Begin on the driver's own executor.
//   - DDL is not transactional in MySQL or MariaDB: a migration that fails
//     half way leaves the statements before the failure applied.
//
// Deadlocks are retried: a write the driver runs in its own transaction is
// retried a few times when InnoDB picks it as a deadlock victim. Inside a
// user's transaction the error is returned, since InnoDB has rolled the
// whole transaction back; the handler's attempt then fails and is retried.
// Begin the transactions you pass to InsertTx and CompleteTx as READ
// COMMITTED (sql.TxOptions{Isolation: sql.LevelReadCommitted}): under the
// default REPEATABLE READ, InnoDB's gap locks on the attempt history make
// such deadlocks between concurrent completions likely.
package mysql

import (
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sync/atomic"

	"github.com/leasehold/leasehold/driver"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

var _ driver.Driver[*sql.Tx] = (*Driver)(nil)

// Driver is the MySQL and MariaDB backend. Its transaction type is *sql.Tx.
// Create it with New or Open; it is safe for concurrent use.
type Driver struct {
	db         *sql.DB
	migrations []driver.Migration
	// savepoints numbers savepoint names: MySQL replaces a savepoint of the
	// same name instead of nesting it.
	savepoints atomic.Uint64
	// multi is whether db sends several statements with arguments in one
	// round trip (multiUnknown until probed): the driver's own
	// transactions are connTx then.
	multi atomic.Int32
}

// New returns a driver on db, a database opened with the driver name "mysql"
// (github.com/go-sql-driver/mysql) and a DSN with multiStatements=true; see
// DSN for the recommended settings.
func New(db *sql.DB) *Driver {
	return &Driver{db: db, migrations: mustMigrations()}
}

// mustMigrations parses the embedded migration files. They are fixed at
// compile time, so a parse error is a broken build, not a runtime condition.
func mustMigrations() []driver.Migration {
	sub, err := fs.Sub(migrationFS, "migrations")
	if err != nil {
		panic(fmt.Sprintf("mysql: open embedded migrations: %v", err))
	}
	ms, err := driver.MigrationsFromFS(sub)
	if err != nil {
		panic(fmt.Sprintf("mysql: parse embedded migrations: %v", err))
	}
	return ms
}

// Name returns "mysql".
func (d *Driver) Name() string { return "mysql" }

// DB returns the database the driver runs on.
func (d *Driver) DB() *sql.DB { return d.db }

// GetExecutor returns an executor on the database pool. Its write methods of
// several statements each run in their own transaction.
func (d *Driver) GetExecutor() driver.Executor {
	return &executor{d: d, q: d.db, onPool: true}
}

// UnwrapExecutor returns an executor that runs inside tx. It never commits or
// rolls tx back; a write method of several statements runs inside a savepoint
// so that it is atomic within tx.
func (d *Driver) UnwrapExecutor(tx *sql.Tx) driver.Executor {
	return &executor{d: d, q: tx}
}

// Migrations returns the schema migrations in version order.
func (d *Driver) Migrations() []driver.Migration {
	out := make([]driver.Migration, len(d.migrations))
	copy(out, d.migrations)
	return out
}
