package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	lhsqlite "github.com/leasehold/leasehold/sqlite"
)

// sqliteLatencyBackend is -backend sqlite for the latency mode: one
// leasehold database file (our Open: WAL, synchronous=FULL, busy timeout,
// BEGIN IMMEDIATE) in -sqlite-dir or a temporary directory, and the engines
//
//	leasehold-default our defaults, 100 workers
//	leasehold-remote  our defaults, with jobs inserted by another client of
//	                  the same driver in this process
//	leasehold-xproc   our defaults, with jobs inserted by a child process of
//	                  this binary on the same file: the wake-up row and
//	                  PRAGMA data_version (migration 6) wake the client
//
// River's SQLite driver is not measured here: the sqlite mode compares the
// drain.
func sqliteLatencyBackend(ctx context.Context, o *options) (*backend, error) {
	dir, cleanup := o.sqliteDir, func() {}
	if dir == "" {
		d, err := os.MkdirTemp("", "leasehold-bench-sqlite-")
		if err != nil {
			return nil, err
		}
		dir, cleanup = d, func() { os.RemoveAll(d) }
	}
	path := filepath.Join(dir, "latency.db")
	d, db, err := lhsqlite.Open(path)
	if err != nil {
		cleanup()
		return nil, err
	}
	if _, err := migrate.New(d).Up(ctx); err != nil {
		db.Close()
		cleanup()
		return nil, fmt.Errorf("migrate leasehold sqlite: %w", err)
	}
	var children []*childInserter
	resets := []string{"DELETE FROM leasehold_job", "DELETE FROM leasehold_attempt"}
	return &backend{
		name: "sqlite", line: "sqlite-",
		about:          []string{"# SQLite file " + path + " (WAL, synchronous=FULL); the insert child opens the same file"},
		latencyEngines: []string{"leasehold-default", "leasehold-remote", "leasehold-xproc"},
		engine: func(name string, spec engineSpec, h *hooks) (engine, error) {
			switch name {
			case "leasehold-default", "leasehold-remote", "leasehold-xproc":
			default:
				return nil, fmt.Errorf("unknown engine %q on -backend sqlite (leasehold-default, leasehold-remote, leasehold-xproc)", name)
			}
			t := newStmtTrace()
			e, err := newLeaseholdEngine(name, tracedSQLite{d, t}, leasehold.Config{}, h, dbExec(db), resets, "ANALYZE")
			if err != nil {
				return nil, err
			}
			e.trace, e.remote = t, name == "leasehold-remote"
			if name == "leasehold-xproc" {
				child, err := startInsertChild("sqlite " + path)
				if err != nil {
					return nil, err
				}
				children = append(children, child)
				e.insertVia = child.insert
			}
			return e, nil
		},
		close: func() {
			for _, c := range children {
				c.close() //nolint:errcheck // its inserts were answered or failed the run
			}
			db.Close()
			cleanup()
		},
	}, nil
}
