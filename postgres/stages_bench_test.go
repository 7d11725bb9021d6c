package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
)

// The benchmarks of stages and dependencies (drivertest) on Postgres,
// each on a fresh schema. Reproduce one at a time with
//
//	go test -run '^$' -bench 'CheckpointWrite' -benchtime 2000x ./postgres
//	go test -run '^$' -bench 'DrainCheckpoint|FanIn' -benchtime 1x ./postgres

func newBenchDriver(tb testing.TB) driver.Driver[pgx.Tx] { return newTestDriver(tb) }

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
