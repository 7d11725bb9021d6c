package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

// runSQLite drains a backlog on SQLite: leasehold against River's SQLite
// driver, each on its own database file, in alternating rounds.
func runSQLite(ctx context.Context, o *options, out io.Writer) error {
	dir := o.sqliteDir
	if dir == "" {
		d, err := os.MkdirTemp("", "leasehold-bench-sqlite-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	names := o.engines
	if names == nil {
		names = []string{"river", "leasehold"}
	}
	var engines []engine
	for _, n := range names {
		e, closeDB, err := sqliteEngine(ctx, dir, n, engineSpec{workers: o.workers, dropIndexes: o.dropIndexes}, newHooks())
		if err != nil {
			return err
		}
		defer closeDB()
		engines = append(engines, e)
	}
	jobs := orDefault(o.jobs, 20_000)
	rounds := orDefault(o.rounds, 3)
	all, err := alternate(ctx, engines, rounds, func(e engine) (sample, error) { return drainRound(ctx, e, jobs, &backend{server: noServer}) })
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "# sqlite drain: %d jobs per round, %d rounds, engines alternating\n", jobs, rounds)
	printThroughput(out, "sqlite", "jobs/s", all, noServer)
	printTraces(out, engines)
	return nil
}
