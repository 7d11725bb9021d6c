// Package drivertest is the conformance suite every leasehold backend runs.
// A behaviour is specified here once; each backend's tests call Exercise with
// a Backend that hands out fresh, migrated, empty databases.
package drivertest

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

// Backend gives the suite isolated databases and user transactions on them.
type Backend[TTx any] struct {
	// New returns a driver on a fresh, migrated, empty database (a schema per
	// test on Postgres, a temp file on SQLite), released with t.Cleanup.
	New func(t *testing.T) driver.Driver[TTx]
	// BeginTx starts a transaction of the user's own kind on d's database.
	BeginTx func(ctx context.Context, d driver.Driver[TTx]) (TTx, error)
	// CommitTx and RollbackTx end such a transaction.
	CommitTx   func(ctx context.Context, tx TTx) error
	RollbackTx func(ctx context.Context, tx TTx) error
}
