package leasehold

import (
	"context"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// Leader roles. Each is a lease row in the database, held by one client at
// a time, with a fencing token that grows with every new holder.
const (
	leaderPeriodic    = "periodic"
	leaderMaintenance = "maintenance"
)

// elector holds, or tries to take, one leader lease. It is used by one
// goroutine; the lease is our own pattern again: a conditional write on the
// database clock, a token, and a local deadline on the monotonic clock.
type elector struct {
	exec   driver.Executor
	name   string
	owner  string
	ttl    time.Duration
	logger *slog.Logger

	token      int64     // the token held; zero when not leader
	validUntil time.Time // local deadline of the lease (monotonic)
}

// attempt takes or renews the lease and reports the token held (zero when
// not leader). A renewal that fails leaves the leader in place until its
// local deadline, which falls before the database lets anyone else take
// over.
func (e *elector) attempt(ctx context.Context) int64 {
	sentAt := time.Now()
	row, err := e.exec.LeaderAttempt(ctx, &driver.LeaderParams{Name: e.name, Owner: e.owner, Token: e.token, TTL: e.ttl})
	if err != nil {
		if ctx.Err() == nil {
			e.logger.Warn("leasehold: leader lease", "role", e.name, "error", err)
		}
		if e.token != 0 && time.Now().After(e.validUntil) {
			e.logger.Warn("leasehold: leader lease lost at its local deadline", "role", e.name, "token", e.token)
			e.token = 0
		}
		return e.token
	}
	if row.Owner != e.owner {
		if e.token != 0 {
			e.logger.Info("leasehold: leader lease taken over", "role", e.name, "by", row.Owner, "token", row.Token)
		}
		e.token = 0
		return 0
	}
	// Owner strings are unique per process (host:pid:random id), so a row
	// in our name is ours: just taken, renewed, or left by this process's
	// previous start without a resignation.
	if e.token != row.Token {
		e.logger.Info("leasehold: leader lease acquired", "role", e.name, "token", row.Token)
	}
	e.token = row.Token
	e.validUntil = sentAt.Add(e.ttl - e.ttl/10)
	return e.token
}

// resign gives the lease up so that another client takes over at once.
func (e *elector) resign() {
	if e.token == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := e.exec.LeaderResign(ctx, &driver.LeaderParams{Name: e.name, Owner: e.owner, Token: e.token}); err != nil {
		e.logger.Warn("leasehold: resign leader lease", "role", e.name, "error", err)
	}
	e.token = 0
}

// renewEvery is how often a leader renews; followers try twice as often,
// so a lease left by a dead leader is taken within TTL + TTL/6.
func (e *elector) wait() time.Duration {
	if e.token != 0 {
		return e.ttl / 3
	}
	return e.ttl / 6
}

// startLeaders starts the loops that run on one client of the fleet at a
// time: the periodic enqueuer (clients with periodic jobs) and retention.
func (c *clientCore) startLeaders(ctx context.Context) {
	if len(c.cfg.PeriodicJobs) > 0 {
		s := &periodicScheduler{core: c, jobs: c.cfg.PeriodicJobs, elector: c.newElector(leaderPeriodic)}
		c.goService(ctx, s.run)
	}
	if c.cfg.Retention.enabled() {
		p := &pruner{core: c, cfg: c.cfg.Retention, elector: c.newElector(leaderMaintenance)}
		c.goService(ctx, p.run)
	}
}

func (c *clientCore) newElector(role string) *elector {
	return &elector{exec: c.exec, name: role, owner: c.owner, ttl: c.cfg.LeaderTTL, logger: c.logger}
}
