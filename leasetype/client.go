package leasetype

import "time"

// ClientRow is one working client of the fleet, as the client registry
// (table leasehold_client) holds it: every started client upserts its row
// every few seconds and deletes it when it stops.
type ClientRow struct {
	// Owner is the client's lease owner, "host:pid:id", the value its
	// running jobs carry in LeaseOwner.
	Owner string `json:"owner"`
	// Host is the host name of the client's process.
	Host string `json:"host"`
	// PID is the process ID.
	PID int64 `json:"pid"`
	// ID is the client's ID (Config.ID).
	ID string `json:"id"`
	// Version is the leasehold module version the client was built with,
	// "(devel)" when unknown.
	Version string `json:"version"`
	// Queues are the queues the client works, in name order.
	Queues []string `json:"queues"`
	// Running is how many leases the client held at its last beat.
	Running int64 `json:"running"`
	// StartedAt is when the client registered (its Start), on the database clock.
	StartedAt time.Time `json:"started_at"`
	// SeenAt is the client's last beat, on the database clock.
	SeenAt time.Time `json:"seen_at"`
	// ExpiresAt is when the row counts as gone unless the client beats
	// again: a few of its beat intervals after SeenAt.
	ExpiresAt time.Time `json:"expires_at"`
	// Alive reports whether ExpiresAt is still ahead on the database clock
	// when the row was read. A row that is not alive belongs to a client
	// that stopped beating without deregistering (it crashed, or cannot
	// reach the database); it is pruned a lease TTL later.
	Alive bool `json:"alive"`
}
