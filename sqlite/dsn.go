package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	// Registers the "sqlite" database/sql driver.
	_ "modernc.org/sqlite"
)

// BusyTimeout is the busy_timeout, in milliseconds, that DSN configures: how
// long a connection waits for another process's write lock before failing
// with SQLITE_BUSY.
const BusyTimeout = 10_000

// maxIdleConns is the idle connections Open keeps in the pool.
const maxIdleConns = 16

// DSN returns the modernc.org/sqlite data source name for the database file at
// path, configured for a queue:
//
//   - _txlock=immediate: every database/sql transaction starts with BEGIN
//     IMMEDIATE and so holds the write lock from its first statement; a
//     deferred transaction that reads and then writes can fail with
//     SQLITE_BUSY when another writer got in between.
//   - busy_timeout(10000): wait up to 10 s for the write lock.
//   - journal_mode(WAL): readers do not block the writer, nor it them.
//   - synchronous(FULL): a committed job survives a power loss.
//   - foreign_keys(1).
//   - recursive_triggers(1): a job cancelled because its dependency failed
//     cancels the jobs waiting on it in turn (migration 8's triggers).
//
// Users who open their own *sql.DB for New should use this DSN, or add the
// same parameters to theirs. The path is a plain file name; it must not
// contain '?'.
func DSN(path string) string {
	params := []string{
		"_pragma=busy_timeout(" + fmt.Sprint(BusyTimeout) + ")",
		"_pragma=journal_mode(WAL)",
		"_pragma=synchronous(FULL)",
		"_pragma=foreign_keys(1)",
		"_pragma=recursive_triggers(1)",
		"_txlock=immediate",
	}
	return path + "?" + strings.Join(params, "&")
}

// Open opens (creating when missing) the database file at path with DSN and
// returns a driver on it and the database, which the caller closes. It does
// not apply migrations.
func Open(path string) (*Driver, *sql.DB, error) {
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, nil, fmt.Errorf("open sqlite database: %w", err)
	}
	// The first connection switches the file to WAL; doing it now surfaces a
	// bad path or a locked file here rather than on first use. Switching a
	// new file to WAL while another process does the same can fail with
	// SQLITE_BUSY without waiting in the busy handler (several replicas
	// running migrate up on a fresh file): such an open is retried for up to
	// BusyTimeout.
	deadline := time.Now().Add(BusyTimeout * time.Millisecond)
	for {
		err := db.PingContext(context.Background())
		if err == nil {
			break
		}
		if !isBusy(err) || !time.Now().Before(deadline) {
			db.Close()
			return nil, nil, fmt.Errorf("open sqlite database %s: %w", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Keep idle connections: opening one runs the DSN's pragmas, and a queue
	// has many concurrent readers (claim checks, heartbeats, dashboards).
	db.SetMaxIdleConns(maxIdleConns)
	return New(db), db, nil
}
