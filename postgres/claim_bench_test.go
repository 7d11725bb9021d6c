package postgres

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// BenchmarkClaim times claims of 10 jobs from a queue of jobs waiting, as
// JobClaim sends them (after jobClaimPlanSQL: the server runs its cached
// generic plan) and as the claim alone (the server plans every call anew):
//
//	go test -run '^$' -bench Claim -benchtime 400x -count 2 ./postgres
func BenchmarkClaim(b *testing.B) {
	for _, bc := range []struct {
		name   string
		cached bool
	}{{"cached-plan", true}, {"planned-each-call", false}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			d := newTestDriver(b)
			exec := d.GetExecutor().(*executor)
			insertForBench(b, d, b.N*10+100)
			claim := &driver.JobClaimParams{Queue: "q", Max: 10, Owner: "w", DefaultLeaseTTL: time.Hour}
			b.ResetTimer()
			for range b.N {
				if bc.cached {
					if _, err := exec.JobClaim(ctx, claim); err != nil {
						b.Fatal(err)
					}
					continue
				}
				rows, err := exec.db.Query(ctx, jobClaimSQL, claimArgs(claim)...)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := scanClaimed(rows, claim.Max); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
