package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/postgres"
)

// runKeyClaim times the Postgres keyed claim against a large backlog: it
// inserts -jobs waiting jobs (1,000,000) over -keys keys (100,000) with
// COPY (untimed), then runs -claims keyed claims (500) of up to 100 jobs
// each, KeyLimit 1 and fairness, each in its own limited-claim transaction
// (lock the queue's limit row, claim, commit) as a client's claim runs,
// and prints p50, p90 and p99 of one claim transaction. Claimed jobs stay
// running (no handler), so later claims step over their keys as a busy
// queue's do.
func runKeyClaim(ctx context.Context, o *options, out io.Writer) error {
	env, err := setupPostgres(ctx, o.schemaPrefix)
	if err != nil {
		return err
	}
	defer env.close()
	jobs := orDefault(o.jobs, 1_000_000)
	keys := orDefault(o.keys, 100_000)
	claims := orDefault(o.claims, 500)
	for _, q := range []string{"TRUNCATE leasehold_job, leasehold_attempt_log, leasehold_queue_key", "DELETE FROM leasehold_limit"} {
		if _, err := env.leasehold.Exec(ctx, q); err != nil {
			return fmt.Errorf("keyclaim: reset: %w", err)
		}
	}
	drv := postgres.New(env.leasehold)
	ins, err := leasehold.NewClient(drv, &leasehold.Config{Logger: benchLogger()})
	if err != nil {
		return fmt.Errorf("keyclaim: new client: %w", err)
	}
	start := time.Now()
	const batch = 50_000
	params := make([]leasehold.InsertManyParams, 0, batch)
	for i, a := range makeArgs(jobs) {
		params = append(params, leasehold.InsertManyParams{Args: a, InsertOpts: &leasehold.InsertOpts{Key: "k" + strconv.Itoa(i%keys)}})
		if len(params) == batch || i == jobs-1 {
			if _, err := ins.InsertManyFast(ctx, params); err != nil {
				return fmt.Errorf("keyclaim: insert: %w", err)
			}
			params = params[:0]
		}
	}
	if _, err := env.leasehold.Exec(ctx, "VACUUM ANALYZE leasehold_job"); err != nil {
		return fmt.Errorf("keyclaim: vacuum: %w", err)
	}
	fmt.Fprintf(os.Stderr, "  inserted %d jobs over %d keys in %s\n", jobs, keys, time.Since(start).Round(time.Millisecond))

	exec := drv.GetExecutor()
	lock := []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: "default"}}
	took := make([]time.Duration, 0, claims)
	claimed := 0
	for range claims {
		t0 := time.Now()
		tx, err := exec.Begin(ctx)
		if err != nil {
			return fmt.Errorf("keyclaim: begin: %w", err)
		}
		if _, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: lock}); err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("keyclaim: lock: %w", err)
		}
		rows, err := tx.JobClaimKeyed(ctx, &driver.JobClaimKeyedParams{
			Claim:    &driver.JobClaimParams{Queue: "default", Max: 100, Owner: "bench-keyclaim", DefaultLeaseTTL: time.Hour},
			KeyLimit: 1, Fair: true,
		})
		if err != nil {
			_ = tx.Rollback(ctx)
			return fmt.Errorf("keyclaim: claim: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("keyclaim: commit: %w", err)
		}
		took = append(took, time.Since(t0))
		claimed += len(rows)
	}
	p := percentiles(took)
	fmt.Fprintf(out, "# keyclaim: %d waiting jobs over %d keys, %d keyed claims of up to 100 (KeyLimit 1, fair), %d jobs claimed\n", jobs, keys, claims, claimed)
	fmt.Fprintf(out, "keyclaim     leasehold          ms/claim p50 %.2f  median %.2f  p90 %.2f  p99 %.2f\n", p[0], p[0], p[1], p[2])
	return nil
}
