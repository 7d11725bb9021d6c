package main

import (
	"context"
	"fmt"
	"io"
)

// backend is the database the drain and latency modes run on: Postgres (the
// default) or MySQL/MariaDB (-backend mysql); the latency mode also on
// SQLite (-backend sqlite).
type backend struct {
	name string
	// line prefixes the mode column of the result lines ("mysql-drain"), so
	// that figures of two backends are never confused.
	line   string
	server dbServer
	// about are comment lines on the server, printed before the results.
	about []string
	// drainEngines and latencyEngines are the engines run by default.
	drainEngines, latencyEngines []string
	drainJobs                    int // drain's default backlog
	engine                       func(name string, spec engineSpec, h *hooks) (engine, error)
	// after prints comment lines after the results, when set.
	after func(io.Writer)
	// settle, when set, runs after a round's backlog is in and before the
	// round is timed (checkpoint).
	settle func(context.Context) error
	close  func()
	pg     *pgEnv // Postgres only: latency -retained
}

func openBackend(ctx context.Context, o *options) (*backend, error) {
	switch o.backend {
	case "postgres":
		env, err := setupPostgres(ctx, o.schemaPrefix)
		if err != nil {
			return nil, err
		}
		return &backend{
			name: "postgres", server: pgServer, drainJobs: 200_000,
			drainEngines:   []string{"raw", "river", "leasehold"},
			latencyEngines: []string{"leasehold-default", "river-default", "river-2ms"},
			engine: func(name string, spec engineSpec, h *hooks) (engine, error) {
				return pgEngine(ctx, env, name, spec, h)
			},
			close: env.close, pg: env,
			settle: env.checkpoint,
		}, nil
	case "mysql":
		env, err := setupMySQL(ctx, o.schemaPrefix)
		if err != nil {
			return nil, err
		}
		return &backend{
			name: "mysql", line: "mysql-", server: mysqlServer, about: env.about(), drainJobs: 50_000,
			drainEngines:   []string{"raw", "leasehold"},
			latencyEngines: []string{"leasehold-default", "leasehold-remote", "leasehold-xproc"},
			engine: func(name string, spec engineSpec, h *hooks) (engine, error) {
				return mysqlEngine(env, name, spec, h)
			},
			after: func(w io.Writer) { fmt.Fprintln(w, env.pools()) },
			close: env.close,
		}, nil
	case "sqlite":
		return sqliteLatencyBackend(ctx, o)
	}
	return nil, fmt.Errorf("unknown -backend %q (postgres, mysql, or sqlite for latency)", o.backend)
}

// printAbout prints the backend's comment lines on the server.
func (b *backend) printAbout(w io.Writer) {
	for _, l := range b.about {
		fmt.Fprintln(w, l)
	}
}

// printAfter prints the backend's closing comment lines, if any.
func (b *backend) printAfter(w io.Writer) {
	if b.after != nil {
		b.after(w)
	}
}
