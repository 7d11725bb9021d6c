package sqlite

import (
	"testing"

	"github.com/leasehold/leasehold/driver/drivertest"
)

// BenchmarkKeyedClaimBacklog times keyed claims of up to 100 jobs
// (KeyLimit 1, fair) against 200,000 waiting jobs over 20,000 keys, a
// quarter of them with a job running, analyzed
// (drivertest.BenchKeyedClaimBacklog). The insert, untimed, runs once.
// Reproduce with
//
//	go test -run '^$' -bench KeyedClaimBacklog -benchtime 50x ./sqlite
func BenchmarkKeyedClaimBacklog(b *testing.B) {
	drivertest.BenchKeyedClaimBacklog(b, newBenchDriver, 200_000, 20_000, "ANALYZE")
}
