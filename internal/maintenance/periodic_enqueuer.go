package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// PeriodicExecutor is what the PeriodicEnqueuer needs of a driver executor.
type PeriodicExecutor interface {
	Now(ctx context.Context) (time.Time, error)
	Begin(ctx context.Context) (driver.ExecutorTx, error)
	PeriodicEnsure(ctx context.Context, params *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error)
	PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error)
}

// Schedule computes the slots of a periodic job (leasehold.Schedule).
type Schedule interface {
	// Next returns the first slot strictly after t; the zero time when there is none.
	Next(t time.Time) time.Time
	// String returns the schedule's spec, stored with the schedule.
	String() string
}

// PeriodicJob is one schedule the enqueuer keeps.
type PeriodicJob struct {
	// Name identifies the schedule's row.
	Name string
	// Schedule gives the slots.
	Schedule Schedule
	// SkipMissed runs a slot only if a leader reaches it within the leader
	// TTL of its time; otherwise one job runs for the latest missed slot.
	SkipMissed bool
	// Insert inserts the slot's job with exec (inside the transaction that
	// advances the schedule) and returns its ID and queue. missed is the
	// number of earlier slots the job stands for.
	Insert func(ctx context.Context, exec driver.Executor, slot time.Time, missed int) (jobID int64, queue string, err error)
}

// PeriodicEnqueuer competes for the periodic leader lease and, while it
// holds it, enqueues the due slots of its schedules. A slot's job and the
// schedule's advance commit in one transaction fenced by the leader's
// token, so two clients never enqueue the same slot.
type PeriodicEnqueuer struct {
	// Exec reads the clock and the schedules and starts the transactions.
	Exec PeriodicExecutor
	// Elector holds the periodic leader lease (role LeaderPeriodic).
	Elector *Elector
	// Jobs are the schedules.
	Jobs []PeriodicJob
	// Logger receives errors.
	Logger *slog.Logger
	// OnEnqueued is told the queue of every slot's job enqueued.
	OnEnqueued func(queue string)

	ensured bool // schedule rows registered since this client became leader
}

// Run enqueues due slots while leader until ctx ends; then it resigns.
func (s *PeriodicEnqueuer) Run(ctx context.Context) {
	defer s.Elector.Resign()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var failingSince time.Time // the leader's first failed round since its last success
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wait := s.Elector.Wait()
		if token := s.Elector.Attempt(ctx); token != 0 {
			wait = s.Elector.Wait()
			next, err := s.enqueueDue(ctx, token)
			switch {
			case err == nil:
				failingSince = time.Time{}
				if until := time.Until(next); until < wait {
					wait = until
				}
			case ctx.Err() != nil:
				return
			default:
				s.Logger.Warn("leasehold: enqueue periodic jobs", "error", err)
				s.ensured = false
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				// A leader that can renew its lease but not enqueue (a
				// failing transaction, a broken insert) would hold the
				// schedules hostage: after a lease's worth of failures it
				// steps down and sits out one lease, so another client
				// can take over.
				if time.Since(failingSince) > s.Elector.TTL {
					s.Logger.Warn("leasehold: periodic leader stepping down after failing for its lease TTL", "ttl", s.Elector.TTL)
					s.Elector.Resign()
					failingSince = time.Time{}
					wait = s.Elector.TTL
				} else {
					wait = min(wait, s.Elector.TTL/6)
				}
			}
		} else {
			s.ensured = false
			failingSince = time.Time{}
		}
		timer.Reset(max(wait, 10*time.Millisecond))
	}
}

// RunOnce takes or renews the leader lease and, when it holds it, enqueues
// every due slot. It returns when the next slot falls due (local clock);
// the zero time when this client is not leader.
func (s *PeriodicEnqueuer) RunOnce(ctx context.Context) (time.Time, error) {
	token := s.Elector.Attempt(ctx)
	if token == 0 {
		s.ensured = false
		return time.Time{}, nil
	}
	return s.enqueueDue(ctx, token)
}

// enqueueDue registers the schedules (first time as leader), enqueues every
// due slot, and returns when the next slot falls due (local clock).
func (s *PeriodicEnqueuer) enqueueDue(ctx context.Context, token int64) (time.Time, error) {
	dbNow, err := s.Exec.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if !s.ensured {
		for _, j := range s.Jobs {
			first := MicroUTC(j.Schedule.Next(dbNow))
			if first.IsZero() {
				return time.Time{}, fmt.Errorf("periodic job %q: schedule %q has no slot after %s", j.Name, j.Schedule, dbNow)
			}
			if _, err := s.Exec.PeriodicEnsure(ctx, &driver.PeriodicEnsureParams{Name: j.Name, Spec: j.Schedule.String(), NextRunAt: first}); err != nil {
				return time.Time{}, fmt.Errorf("register periodic job %q: %w", j.Name, err)
			}
		}
		s.ensured = true
	}
	rows, err := s.Exec.PeriodicList(ctx)
	if err != nil {
		return time.Time{}, err
	}
	byName := make(map[string]*leasetype.PeriodicSchedule, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	next := dbNow.Add(time.Hour)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		row := byName[j.Name]
		if row == nil || row.Spec != j.Schedule.String() {
			// Deleted, or changed by a client configured differently:
			// register again on the next round.
			s.ensured = false
			continue
		}
		if row.NextRunAt.After(dbNow) {
			next = earliest(next, row.NextRunAt)
			continue
		}
		upcoming, err := s.fire(ctx, j, row, dbNow, token)
		if err != nil {
			return time.Time{}, fmt.Errorf("periodic job %q: %w", j.Name, err)
		}
		next = earliest(next, upcoming)
	}
	return time.Now().Add(next.Sub(dbNow)), nil
}

// maxCatchUpSlots bounds the walk over missed slots (an @every 1s schedule
// down for a day has 86,400).
const maxCatchUpSlots = 1_000_000

// fire enqueues the job of a due schedule and advances it, in one
// transaction, and returns the schedule's next slot.
func (s *PeriodicEnqueuer) fire(ctx context.Context, j *PeriodicJob, row *leasetype.PeriodicSchedule, dbNow time.Time, token int64) (time.Time, error) {
	// The latest slot that is due; the earlier ones were missed.
	slot, missed := row.NextRunAt, 0
	for missed < maxCatchUpSlots {
		n := j.Schedule.Next(slot)
		if n.IsZero() || n.After(dbNow) {
			break
		}
		slot, missed = n, missed+1
	}
	next := MicroUTC(j.Schedule.Next(slot))
	if next.IsZero() || !next.After(dbNow) {
		// A schedule with no more slots (or a walk cut short): look again later.
		next = MicroUTC(dbNow.Add(time.Hour))
	}
	run := !j.SkipMissed || missed == 0 && dbNow.Sub(slot) <= s.Elector.TTL

	tx, err := s.Exec.Begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var jobID int64
	var queue string
	if run {
		if jobID, queue, err = j.Insert(ctx, tx, slot, missed); err != nil {
			return time.Time{}, err
		}
	}
	ok, err := tx.PeriodicAdvance(ctx, &driver.PeriodicAdvanceParams{
		Name: j.Name, From: row.NextRunAt, Next: next, SlotAt: MicroUTC(slot), LastJobID: jobID,
		LeaderName: LeaderPeriodic, LeaderToken: token,
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("advance schedule: %w", err)
	}
	if !ok {
		// Another leader advanced it, or our lease ended: enqueue nothing.
		return next, errors.New("schedule advance refused: leader lease lost or slot already taken")
	}
	if err := tx.Commit(ctx); err != nil {
		return time.Time{}, err
	}
	if run && s.OnEnqueued != nil {
		s.OnEnqueued(queue)
	}
	return next, nil
}

// MicroUTC is t in UTC at the microsecond, the precision every backend
// stores, so that a time read back compares equal to the one written.
func MicroUTC(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func earliest(t time.Time, others ...time.Time) time.Time {
	for _, o := range others {
		if o.Before(t) {
			t = o
		}
	}
	return t
}
