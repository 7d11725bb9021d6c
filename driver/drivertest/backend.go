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

	// NewSized returns a driver like New's whose pool (the one BeginTx
	// draws on) holds at most conns connections. The busy-pool test needs
	// it.
	NewSized func(t *testing.T, conns int) driver.Driver[TTx]
	// BeginReadTx, when set, starts a transaction of the user's kind that
	// only reads; the busy-pool test's handlers hold it instead of
	// BeginTx's. A backend sets it whose BeginTx takes a lock that every
	// writer needs (SQLite's BEGIN IMMEDIATE): no reserved connection can
	// renew a lease while a handler holds the database's only write lock.
	BeginReadTx func(ctx context.Context, d driver.Driver[TTx]) (TTx, error)
	// NewPeer, when set, returns a second driver on d's database with a
	// pool of its own, as another process on the database would have,
	// released with t.Cleanup. The wake-up test across pools needs it.
	NewPeer func(t *testing.T, d driver.Driver[TTx]) driver.Driver[TTx]
	// CompletionInJobRow says the backend keeps the lease that completed a
	// job in the job's row while the job exists, writing no attempt row for
	// it (Postgres since schema version 12): JobAttempts presents it, job
	// deletion moves it into the attempt rows, and AttemptPrune, which
	// deletes attempt rows, reaches it only after that.
	CompletionInJobRow bool
}
