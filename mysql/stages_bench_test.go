package mysql

import (
	"database/sql"
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
)

// The benchmarks of stages and dependencies (drivertest) on MySQL,
// each on a fresh database. Reproduce one at a time with
//
//	go test -run '^$' -bench 'CheckpointWrite' -benchtime 2000x ./mysql
//	go test -run '^$' -bench 'DrainCheckpoint|FanIn' -benchtime 1x ./mysql

func newBenchDriver(tb testing.TB) driver.Driver[*sql.Tx] { return newTestDriver(tb) }

// BenchmarkCheckpointWrite is one Checkpoint call from a handler.
func BenchmarkCheckpointWrite(b *testing.B) { drivertest.BenchCheckpointWrite(b, newBenchDriver) }

// BenchmarkDrainCheckpoint drains 5000 jobs with 16 workers, without a
// checkpoint and with one per job.
func BenchmarkDrainCheckpoint(b *testing.B) {
	drivertest.BenchDrainCheckpoint(b, newBenchDriver, 5000, 16)
}

// BenchmarkFanIn is 10,000 parents and one child waiting on them, with 16
// workers, against the same drain without the child.
func BenchmarkFanIn(b *testing.B) { drivertest.BenchFanIn(b, newBenchDriver, 10000, 16) }
