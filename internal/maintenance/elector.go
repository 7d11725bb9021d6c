package maintenance

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// Leader roles. Each is a lease row in the database, held by one client at
// a time, with a fencing token that grows with every new holder.
const (
	// LeaderPeriodic is the role of the client that enqueues periodic jobs.
	LeaderPeriodic = "periodic"
	// LeaderMaintenance is the role of the client that prunes old rows.
	LeaderMaintenance = "maintenance"
)

// LeaderExecutor is what an Elector needs of a driver executor.
type LeaderExecutor interface {
	LeaderAttempt(ctx context.Context, params *driver.LeaderParams) (*driver.LeaderRow, error)
	LeaderResign(ctx context.Context, params *driver.LeaderParams) error
}

// Elector holds, or tries to take, one leader lease. It is not a loop of
// its own: the service that needs the role (Pruner, PeriodicEnqueuer) calls
// Attempt on every round of its loop, and Resign when it stops. One
// goroutine uses it. The lease is the queue's own pattern again: a
// conditional write on the database clock, a token, and a local deadline on
// the monotonic clock.
type Elector struct {
	// Exec runs the leader statements.
	Exec LeaderExecutor
	// Name is the role (LeaderPeriodic, LeaderMaintenance).
	Name string
	// Owner is this client's lease owner ("host:pid:id").
	Owner string
	// TTL is the leader lease's duration.
	TTL time.Duration
	// Logger receives errors and changes of leader.
	Logger *slog.Logger

	token      int64     // the token held; zero when not leader
	validUntil time.Time // local deadline of the lease (monotonic)
}

// Attempt takes or renews the lease and reports the token held (zero when
// not leader). A renewal that fails leaves the leader in place until its
// local deadline, which falls before the database lets anyone else take
// over.
func (e *Elector) Attempt(ctx context.Context) int64 {
	sentAt := time.Now()
	row, err := e.Exec.LeaderAttempt(ctx, &driver.LeaderParams{Name: e.Name, Owner: e.Owner, Token: e.token, TTL: e.TTL})
	if err != nil {
		if ctx.Err() == nil {
			e.Logger.Warn("leasehold: leader lease", "role", e.Name, "error", err)
		}
		if e.token != 0 && time.Now().After(e.validUntil) {
			e.Logger.Warn("leasehold: leader lease lost at its local deadline", "role", e.Name, "token", e.token)
			e.token = 0
		}
		return e.token
	}
	if row.Owner != e.Owner {
		if e.token != 0 {
			e.Logger.Info("leasehold: leader lease taken over", "role", e.Name, "by", row.Owner, "token", row.Token)
		}
		e.token = 0
		return 0
	}
	// Owner strings are unique per process (host:pid:random id), so a row
	// in our name is ours: just taken, renewed, or left by this process's
	// previous start without a resignation.
	if e.token != row.Token {
		e.Logger.Info("leasehold: leader lease acquired", "role", e.Name, "token", row.Token)
	}
	e.token = row.Token
	e.validUntil = sentAt.Add(e.TTL - e.TTL/10)
	return e.token
}

// Resign gives the lease up so that another client takes over at once.
func (e *Elector) Resign() {
	if e.token == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.Exec.LeaderResign(ctx, &driver.LeaderParams{Name: e.Name, Owner: e.Owner, Token: e.token}); err != nil {
		e.Logger.Warn("leasehold: resign leader lease", "role", e.Name, "error", err)
	}
	e.token = 0
}

// Wait is the time until the next Attempt: a leader renews every third of
// the TTL and a follower tries every sixth, so a lease left by a dead
// leader is taken within TTL + TTL/6.
func (e *Elector) Wait() time.Duration {
	if e.token != 0 {
		return e.TTL / 3
	}
	return e.TTL / 6
}
