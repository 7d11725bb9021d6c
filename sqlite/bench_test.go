package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
)

// BenchmarkClaimFinish measures one lease cycle of ten jobs: a claim and a
// batched finish, each its own write transaction.
func BenchmarkClaimFinish(b *testing.B) {
	ctx := context.Background()
	d, db, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		b.Fatal(err)
	}
	exec := d.GetExecutor()
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: insertParams("default", b.N*10)}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Max: 10, Owner: "bench", DefaultLeaseTTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		items := make([]*driver.JobFinish, len(jobs))
		for i, j := range jobs {
			items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: "completed", Outcome: "completed"}
		}
		if _, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "bench", Items: items}); err != nil {
			b.Fatal(err)
		}
	}
}
