package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// BenchKeyedClaimBacklog times keyed claims against a large backlog, the
// same on every backend: it inserts jobs waiting jobs over keys keys (key
// i of job i modulo keys, so a key's jobs are spread over the whole
// insert), with one job of every fourth key running beforehand (inserted
// and claimed first), then runs analyze when it is not empty (the
// backend's statement that brings the planner's statistics up to date, as
// a table that has held its backlog for a while has them), all untimed.
// One op is one limited claim transaction as a client runs it (Begin, lock
// the queue's limit row, a keyed claim of up to 100 jobs with KeyLimit 1
// and fairness, Commit). Claimed jobs stay running, so later claims step
// over their keys as a busy queue's do; the setup runs once (b.Loop), so
// the claims of one run go on from one another. Besides the time per
// transaction it reports claim-ms, the JobClaimKeyed call alone (without
// the lock and the commit's sync to disk), and jobs/claim: a claim that
// took fewer than 100 found too few free keys.
func BenchKeyedClaimBacklog[TTx any](b *testing.B, newDriver func(testing.TB) driver.Driver[TTx], jobs, keys int, analyze string) {
	ctx := context.Background()
	d := newDriver(b)
	exec := d.GetExecutor()
	const queue = "keyed_bench"
	key := func(i int) string { return fmt.Sprintf("k%06d", i%keys) }
	insert := func(n int, keyOf func(int) string) {
		const batch = 5000
		params := make([]*driver.JobInsertParams, 0, batch)
		for i := range n {
			p := jobParams("bench_keyed", queue)
			p.Key = keyOf(i)
			params = append(params, p)
			if len(params) == batch || i == n-1 {
				if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: params}); err != nil {
					b.Fatalf("insert: %v", err)
				}
				params = params[:0]
			}
		}
	}
	start := time.Now()
	running := keys / 4
	insert(running, func(i int) string { return key(4 * i) })
	if got, err := exec.JobClaim(ctx, claimParams(queue, "bench-running", running, time.Hour)); err != nil || len(got) != running {
		b.Fatalf("claim the running jobs: %d of %d, %v", len(got), running, err)
	}
	insert(jobs, key)
	if analyze != "" {
		if err := exec.Exec(ctx, analyze); err != nil {
			b.Fatalf("analyze: %v", err)
		}
	}
	b.Logf("inserted %d waiting jobs over %d keys, %d keys with a job running, in %s",
		jobs, keys, running, time.Since(start).Round(time.Millisecond))

	lock := &driver.LimitLockParams{Keys: []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: queue}}}
	claim := &driver.JobClaimKeyedParams{
		Claim:    claimParams(queue, "bench-keyed", 100, time.Hour),
		KeyLimit: 1, Fair: true,
	}
	var (
		claims, claimed int
		inClaim         time.Duration
	)
	for b.Loop() {
		tx, err := exec.Begin(ctx)
		if err != nil {
			b.Fatalf("begin: %v", err)
		}
		if _, err := tx.LimitLock(ctx, lock); err != nil {
			b.Fatalf("lock: %v", err)
		}
		t0 := time.Now()
		rows, err := tx.JobClaimKeyed(ctx, claim)
		inClaim += time.Since(t0)
		if err != nil {
			b.Fatalf("claim keyed: %v", err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatalf("commit: %v", err)
		}
		claims++
		claimed += len(rows)
	}
	b.ReportMetric(float64(claimed)/float64(claims), "jobs/claim")
	b.ReportMetric(float64(inClaim.Microseconds())/1000/float64(claims), "claim-ms")
}
