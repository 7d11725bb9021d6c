// Package maintenance holds the client's background services, one per
// file. Each is a struct of narrow dependencies (the few executor methods it
// calls, declared here as small interfaces) and callbacks through which it
// reports to the client, with Run (its loop, until the context ends) and
// RunOnce (one round, for tests and for Run). None of them knows the client:
// the root package builds them from its config and wires the callbacks.
//
//   - Expirer reclaims leases that expired on the database clock.
//   - Pruner deletes old finished jobs and attempt history, as the
//     maintenance leader.
//   - PeriodicEnqueuer enqueues periodic jobs' due slots, as the periodic
//     leader.
//   - Elector holds or competes for one leader lease; the pruner and the
//     periodic enqueuer each use one.
//   - CancelPoller finds this client's running jobs that were cancelled from
//     outside.
package maintenance
