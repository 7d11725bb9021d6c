package driver

import "context"

// Reserver is implemented by drivers that can give the client's lease
// machinery database capacity of its own: connections that the application's
// handlers, which share the driver's pool for their business transactions,
// cannot take. Without it a pool whose connections are all held by handlers
// delays lease renewals past their TTL, and healthy jobs lose their leases
// and run again.
//
// The client opens a reserved executor at Start and closes it at Stop; an
// insert-only client never opens one. The client runs on it the writes that
// fencing depends on (claims, renewals, outcome writes, expiries) and the
// cancellation poll; everything else (inserts, operator actions, reads,
// leader elections, pruning) stays on GetExecutor, and the transactional
// methods on the caller's transaction.
type Reserver interface {
	// OpenReserved opens an executor on connections reserved for its caller
	// and establishes them before it returns, so that they exist when the
	// pool is later exhausted. It fails when they cannot be opened.
	OpenReserved(ctx context.Context, params *OpenReservedParams) (ReservedExecutor, error)
}

// OpenReservedParams configure a reserved executor.
type OpenReservedParams struct {
	// Conns is how many connections to reserve; 0 or less means the
	// driver's default.
	Conns int
}

// ReservedExecutor is an executor on reserved connections. Its methods
// behave as those of GetExecutor's executor; they wait for a free reserved
// connection rather than for one of the pool's.
type ReservedExecutor interface {
	Executor
	// Close releases the reserved connections. The executor must not be used
	// afterwards.
	Close()
}
