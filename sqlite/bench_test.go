package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

func BenchmarkClaimFinish(b *testing.B) {
	ctx := context.Background()
	t := &testing.T{}
	_ = t
	d, db, err := Open(b.TempDir() + "/b.db")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := d.GetExecutor().Exec(ctx, d.Migrations()[0].Up); err != nil {
		b.Fatal(err)
	}
	if _, err := d.GetExecutor().JobInsertFast(ctx, insertParams("default", b.N*10+10)); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		jobs, err := d.GetExecutor().JobClaim(ctx, &driver.JobClaimParams{Queue: "default", Max: 10, Owner: "o", DefaultLeaseTTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		items := make([]*driver.JobFinish, len(jobs))
		for i, j := range jobs {
			items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: "completed", Outcome: "completed"}
		}
		if _, err := d.GetExecutor().JobFinish(ctx, &driver.JobFinishParams{Items: items}); err != nil {
			b.Fatal(err)
		}
	}
}
