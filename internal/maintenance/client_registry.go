package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// RegistryExecutor is what the ClientRegistrar needs of a driver executor.
type RegistryExecutor interface {
	ClientRegister(ctx context.Context, params *driver.ClientRegisterParams) error
	ClientRemove(ctx context.Context, params *driver.ClientRemoveParams) (bool, error)
	ClientPrune(ctx context.Context, params *driver.ClientPruneParams) (int64, error)
}

// ClientRegistrar keeps a working client's row in the client registry
// (leasehold_client): it upserts the row at once and then every Interval,
// with the client's running count, and after each beat deletes the rows of
// clients that stopped beating PruneAfter ago. It runs on the client's
// ordinary executor, off the job path: one small upsert and one conditional
// delete every few seconds per client, whatever the load. It does not ride
// the heartbeater, whose batched renewal runs only while leases are held
// and on the reserved connections kept for the lease machinery.
type ClientRegistrar struct {
	// Exec runs the statements.
	Exec RegistryExecutor
	// Row is the client's registry row without Running and TTL.
	Row driver.ClientRegisterParams
	// Running reports how many leases the client holds now.
	Running func() int64
	// Interval is the time between beats. The row counts as alive for
	// three intervals after each beat.
	Interval time.Duration
	// PruneAfter is how long after it stopped counting as alive a row is
	// deleted by any client's registrar.
	PruneAfter time.Duration
	// Logger receives errors.
	Logger *slog.Logger
}

// AliveBeats is how many beat intervals a registry row counts as alive.
const AliveBeats = 3

// Run beats at once and then every Interval until ctx ends. The first beat
// is not made in Start: a pool with no connection to spare beside the
// reserved ones, or SQLite's write lock held by a busy writer, must not
// hold up Start for a listing. Run does not remove the row: Remove does,
// when the client stops, so that a client that dies leaves its row to
// expire.
func (r *ClientRegistrar) Run(ctx context.Context) {
	if r.Interval <= 0 {
		return
	}
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	for {
		r.RunOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunOnce beats once and prunes; it returns how many rows it pruned.
func (r *ClientRegistrar) RunOnce(ctx context.Context) int64 {
	p := r.Row
	p.Running = r.Running()
	p.TTL = AliveBeats * r.Interval
	if err := r.Exec.ClientRegister(ctx, &p); err != nil {
		if ctx.Err() == nil {
			r.Logger.Warn("leasehold: register client", "error", err)
		}
		return 0
	}
	n, err := r.Exec.ClientPrune(ctx, &driver.ClientPruneParams{OlderThan: r.PruneAfter})
	if err != nil {
		if ctx.Err() == nil {
			r.Logger.Warn("leasehold: prune gone clients", "error", err)
		}
		return 0
	}
	return n
}

// Remove deletes the client's row, when it stops.
func (r *ClientRegistrar) Remove(ctx context.Context) {
	if _, err := r.Exec.ClientRemove(ctx, &driver.ClientRemoveParams{Owner: r.Row.Owner}); err != nil {
		r.Logger.Warn("leasehold: deregister client", "error", err)
	}
}
