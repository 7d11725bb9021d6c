package leasehold

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// Config configures a Client. The zero value of every field means its
// default; NewClient copies the config, fills the defaults and validates it,
// and never changes the caller's value.
type Config struct {
	// ID names this client instance in lease owners ("host:pid:ID"); default
	// a random 8-character hex string.
	ID string
	// Workers are the workers this client runs. Nil makes an insert-only client.
	Workers *Workers
	// Queues maps each queue this client works to its settings. Default,
	// when Workers is set: {"default": {MaxWorkers: 100}}.
	Queues map[string]QueueConfig

	// LeaseTTL is the default lease duration; default 30 s. Leases are
	// renewed every LeaseTTL/6 to LeaseTTL/3 while a handler runs.
	LeaseTTL time.Duration
	// ExpiryPolicy is the default policy for expired leases; default retry.
	ExpiryPolicy leasetype.ExpiryPolicy
	// MaxExpiries moves a job to stuck after this many lease expiries even
	// under the retry policy, so a job that crashes its worker every time
	// does not loop forever; default 5. Negative means no limit.
	MaxExpiries int
	// MaxAttempts is the default bound on handler errors; default 25.
	MaxAttempts int
	// Retry is the default retry policy; default ExponentialBackoff{}.
	Retry RetryPolicy
	// MaxArgsBytes bounds the size of a job's encoded arguments and
	// metadata; default 1 MiB.
	MaxArgsBytes int

	// PollInterval is how often each queue is polled when no wake-up
	// arrives; default 1 s.
	PollInterval time.Duration
	// FetchCooldown is the least time between two claims of one queue, to
	// gather freed capacity into one batch; default 2 ms. While the queue
	// has a backlog and jobs still run, a claim also waits until 10 ms
	// after the previous claim started (up to 50 ms where handlers run
	// long), or sooner once a quarter of the queue's workers are free and
	// twice the previous claim's duration has passed.
	FetchCooldown time.Duration
	// WatcherInterval is how often expired leases are reclaimed; default 1 s.
	WatcherInterval time.Duration
	// CompleterMaxBatch bounds the completions written in one statement;
	// default 1000. Where outcome batches carry claims (Postgres), a client
	// with fewer than four times that many workers (MaxWorkers over its
	// queues) writes batches of at most a quarter of them (at least 100),
	// so that several batches are in flight at once.
	CompleterMaxBatch int

	// ReservedConns is how many database connections the lease machinery
	// (claims, renewals, outcome writes, the expirer, the cancellation poll)
	// reserves for itself from Start to Stop, when the driver can reserve
	// them (driver.Reserver: every bundled backend), so that handlers
	// holding the pool's connections cannot delay a renewal. 0 is the
	// driver's default (postgres.DefaultReservedConns in a pool of their
	// own; on MySQL and SQLite connections pinned from the *sql.DB, which
	// count against its SetMaxOpenConns). Negative reserves none: the
	// machinery then shares the driver's pool with the handlers.
	ReservedConns int

	// CancelCheckInterval is how often a client holding leases asks the
	// database whether any of its jobs was cancelled from outside
	// (JobCancel on a running job); default 250 ms. The handler's context
	// is cancelled within this interval plus one round trip.
	CancelCheckInterval time.Duration

	// PeriodicJobs are enqueued on their schedules by the fleet's periodic
	// leader; see PeriodicJob. Clients that configure periodic jobs elect
	// one leader among themselves and should configure the same set.
	PeriodicJobs []*PeriodicJob
	// LeaderTTL is the lease of the periodic and maintenance leaders: a new
	// leader takes over within it after the old one dies; default 15 s.
	LeaderTTL time.Duration
	// Retention prunes finished jobs and attempt history; see Retention.
	Retention Retention

	// RegistryInterval is how often a started client upserts its row in
	// the client registry (leasehold_client: Client.Clients, the
	// dashboard's Clients page, `leasehold clients`); default 5 s. A row
	// counts as alive for three intervals after its last beat and is
	// pruned a LeaseTTL after that. Negative disables the registry for
	// this client.
	RegistryInterval time.Duration

	// Middleware wraps inserts and handler calls and observes heartbeats
	// (tracing, metrics); see Middleware. The first is outermost.
	Middleware []Middleware

	// Logger receives the client's logs; default warnings and errors as text on stderr.
	Logger *slog.Logger
}

// QueueConfig configures one queue on a client.
type QueueConfig struct {
	// MaxWorkers is the most jobs of the queue this client runs at once.
	MaxWorkers int
	// GlobalLimit, when positive, bounds how many jobs of the queue run at
	// once across every client. It is enforced inside the claim (a locked
	// limit row, a count of running jobs, a claim of what fits, one
	// transaction), so it holds under any concurrency. An expired lease
	// frees its slot when it is reclaimed, which the claim that finds it
	// does first. Clients working the queue should agree on the value: each
	// enforces its own.
	GlobalLimit int
	// RateLimit, when set, bounds how many jobs of the queue start per
	// period across every client.
	RateLimit *RateLimit
	// KeyLimit, when positive, bounds how many jobs of the queue with the
	// same key (InsertOpts.Key, WorkerOpts.KeyBy) run at once across every
	// client. Enforced inside the claim like GlobalLimit; both hold when
	// both are set, and a kind's WorkerOpts.KeyLimit holds as well.
	KeyLimit int
	// KeyRateLimit, when set, bounds how many jobs of the queue with the
	// same key start per period across every client: fixed windows aligned
	// to the Unix epoch on the database clock, as RateLimit's, one small
	// row per key that started a job in the current window (the pruner
	// deletes ended windows).
	KeyRateLimit *RateLimit
	// Fair makes claims take jobs round-robin across keys: every key's first
	// waiting job before any key's second, so one key's backlog cannot
	// starve the others. It is implied by KeyLimit, KeyRateLimit and a kind's
	// WorkerOpts.KeyLimit. See doc.go, "Per-key flow control".
	Fair bool
	// Sequenced makes this client claim the queue with the keyed claim,
	// which keeps sequences (InsertOpts.Sequence) in order, even when no
	// other key option is set. It is implied by every key option above and
	// by a worker with SequenceBy or SequencePolicy. A queue claimed by the
	// plain claim does not keep sequences in order.
	Sequenced bool
}

// RateLimit allows Limit job starts (claims) per Period, fleet-wide. Periods
// are fixed windows aligned to the Unix epoch on the database clock, counted
// in the queue's limit row: within one window no more than Limit jobs start;
// across a window boundary up to 2×Limit may start within one Period. A
// retry or a re-run after an expired lease counts as a new start.
type RateLimit struct {
	Limit  int
	Period time.Duration
}

// withDefaults returns a copy of c with defaults filled in, validated.
func (c *Config) withDefaults() (*Config, error) {
	out := Config{}
	if c != nil {
		out = *c
	}
	if out.ID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		out.ID = hex.EncodeToString(b[:])
	}
	if out.Queues == nil && out.Workers != nil {
		out.Queues = map[string]QueueConfig{defaultQueue: {MaxWorkers: 100}}
	}
	queues := make(map[string]QueueConfig, len(out.Queues))
	for name, q := range out.Queues {
		queues[name] = q
	}
	out.Queues = queues
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&out.LeaseTTL, 30*time.Second)
	def(&out.PollInterval, time.Second)
	def(&out.FetchCooldown, 2*time.Millisecond)
	def(&out.WatcherInterval, time.Second)
	def(&out.CancelCheckInterval, 250*time.Millisecond)
	def(&out.LeaderTTL, 15*time.Second)
	def(&out.RegistryInterval, 5*time.Second)
	out.Retention = out.Retention.withDefaults()
	if out.ExpiryPolicy == "" {
		out.ExpiryPolicy = leasetype.ExpiryRetry
	}
	if out.MaxExpiries == 0 {
		out.MaxExpiries = 5
	}
	if out.MaxAttempts == 0 {
		out.MaxAttempts = 25
	}
	if out.Retry == nil {
		out.Retry = ExponentialBackoff{}
	}
	if out.MaxArgsBytes == 0 {
		out.MaxArgsBytes = 1 << 20
	}
	if out.CompleterMaxBatch == 0 {
		out.CompleterMaxBatch = 1000
	}
	if out.Logger == nil {
		out.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return &out, out.validate()
}

func (c *Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case len(c.ID) > 64:
		return bad("ID is %d bytes long (max 64)", len(c.ID))
	case c.LeaseTTL < minLeaseTTL:
		return bad("LeaseTTL %s is below the minimum %s", c.LeaseTTL, minLeaseTTL)
	case c.LeaseTTL > maxLeaseTTL:
		return bad("LeaseTTL %s is above the maximum %s", c.LeaseTTL, maxLeaseTTL)
	case c.ExpiryPolicy != leasetype.ExpiryRetry && c.ExpiryPolicy != leasetype.ExpiryStuck:
		return bad("unknown ExpiryPolicy %q (want retry or stuck)", c.ExpiryPolicy)
	case c.MaxAttempts < 1 || c.MaxAttempts > maxAttemptsLimit:
		return bad("MaxAttempts %d is outside 1 to %d", c.MaxAttempts, maxAttemptsLimit)
	case c.MaxArgsBytes < 1:
		return bad("MaxArgsBytes %d is below 1", c.MaxArgsBytes)
	case c.PollInterval < 0 || c.FetchCooldown < 0 || c.WatcherInterval < 0:
		return bad("intervals must not be negative")
	case c.CompleterMaxBatch < 1:
		return bad("CompleterMaxBatch %d is below 1", c.CompleterMaxBatch)
	case c.CancelCheckInterval < 0:
		return bad("CancelCheckInterval must not be negative")
	case c.LeaderTTL < minLeaseTTL:
		return bad("LeaderTTL %s is below the minimum %s", c.LeaderTTL, minLeaseTTL)
	case c.RegistryInterval > 0 && c.RegistryInterval < minRegistryInterval:
		return bad("RegistryInterval %s is below the minimum %s (negative disables the registry)", c.RegistryInterval, minRegistryInterval)
	}
	if err := c.Retention.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err := validatePeriodicJobs(c.PeriodicJobs); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	for name, q := range c.Queues {
		if err := validateName("queue", name); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if q.MaxWorkers < 1 {
			return bad("queue %q: MaxWorkers %d is below 1", name, q.MaxWorkers)
		}
		if q.GlobalLimit < 0 {
			return bad("queue %q: GlobalLimit %d is negative", name, q.GlobalLimit)
		}
		if q.KeyLimit < 0 {
			return bad("queue %q: KeyLimit %d is negative", name, q.KeyLimit)
		}
		if r := q.KeyRateLimit; r != nil && (r.Limit < 1 || r.Period < time.Millisecond) {
			return bad("queue %q: KeyRateLimit needs Limit ≥ 1 and Period ≥ 1ms (got %d per %s)", name, r.Limit, r.Period)
		}
		if r := q.RateLimit; r != nil && (r.Limit < 1 || r.Period < time.Millisecond) {
			return bad("queue %q: RateLimit needs Limit ≥ 1 and Period ≥ 1ms (got %d per %s)", name, r.Limit, r.Period)
		}
	}
	if c.Workers != nil && len(c.Queues) == 0 {
		return bad("Workers set but no Queues to work")
	}
	return nil
}

// minRegistryInterval bounds how often a client may beat into the registry.
const minRegistryInterval = 10 * time.Millisecond

// ownerID builds the readable worker-instance identifier stored as lease_owner.
func ownerID(id string) string {
	return fmt.Sprintf("%s:%d:%s", ownerHost(), os.Getpid(), id)
}

// ownerHost is the host part of the lease owner.
func ownerHost() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host
}
