package sqlite

import (
	"database/sql"
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
)

// The benchmarks of stages and dependencies (drivertest) on SQLite,
// each on a fresh file. Reproduce one at a time with
//
//	go test -run '^$' -bench 'CheckpointWrite' -benchtime 2000x ./sqlite
//	go test -run '^$' -bench 'DrainCheckpoint|FanIn' -benchtime 1x ./sqlite

func newBenchDriver(tb testing.TB) driver.Driver[*sql.Tx] { return newTestDriver(tb) }

// BenchmarkCheckpointWrite is one Checkpoint call from a handler.
func BenchmarkCheckpointWrite(b *testing.B) { drivertest.BenchCheckpointWrite(b, newBenchDriver) }

// BenchmarkDrainCheckpoint drains 2000 jobs with 8 workers, without a
// checkpoint and with one per job.
func BenchmarkDrainCheckpoint(b *testing.B) {
	drivertest.BenchDrainCheckpoint(b, newBenchDriver, 2000, 8)
}

// BenchmarkFanIn is 10,000 parents and one child waiting on them, with 8
// workers, against the same drain without the child.
func BenchmarkFanIn(b *testing.B) { drivertest.BenchFanIn(b, newBenchDriver, 10000, 8) }
