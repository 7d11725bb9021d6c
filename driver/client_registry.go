package driver

import (
	"strings"
	"time"
)

// ClientRegisterParams is one beat of a working client: ClientRegister
// inserts its row (StartedAt now) or updates it (StartedAt kept), with
// SeenAt now and ExpiresAt now + TTL on the database clock.
type ClientRegisterParams struct {
	// Owner is the client's lease owner, the row's key.
	Owner string
	// Host and PID are the client's process's host name and process ID.
	Host string
	PID  int64
	// ID is the client's Config.ID.
	ID string
	// Version is the leasehold version the client was built with.
	Version string
	// Queues are the queue names the client works.
	Queues []string
	// Running is how many leases the client holds.
	Running int64
	// TTL is how long the row counts as alive without another beat.
	TTL time.Duration
}

// ClientListParams selects the registry rows ClientList returns.
type ClientListParams struct {
	// Limit is the most rows to return; zero means DefaultClientListLimit.
	Limit int
}

// DefaultClientListLimit is the listing size when ClientListParams.Limit is zero.
const DefaultClientListLimit = 1000

// ClientRemoveParams names the row ClientRemove deletes.
type ClientRemoveParams struct {
	// Owner is the lease owner whose row is deleted.
	Owner string
}

// ClientPruneParams bounds ClientPrune: rows whose ExpiresAt is more than
// OlderThan before the database clock are deleted.
type ClientPruneParams struct {
	OlderThan time.Duration
}

// EncodeClientQueues stores queue names as one text column. Queue names
// are ASCII letters, digits, '_', '-' and '.', so a comma separates them.
func EncodeClientQueues(queues []string) string { return strings.Join(queues, ",") }

// DecodeClientQueues reads what EncodeClientQueues stored.
func DecodeClientQueues(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
