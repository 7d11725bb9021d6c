package leasehold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Schedule computes the slots of a periodic job; package cron provides
// cron expressions with time zones and fixed intervals (cron.Parse,
// cron.Every).
type Schedule interface {
	// Next returns the first slot strictly after t; the zero time when there is none.
	Next(t time.Time) time.Time
	// String returns the schedule's spec; it is stored with the schedule,
	// and a changed spec restarts the schedule from the next slot.
	String() string
}

// MissedRunPolicy says what a periodic job does about slots that passed
// while no leader could enqueue them (the fleet was down, or the leader
// died and its lease had not yet expired).
type MissedRunPolicy string

const (
	// CatchUpOnce (the default) runs one job for the missed slots, as soon
	// as a leader sees them: for the latest missed slot, with the number of
	// slots it stands for in its metadata (periodic_missed).
	CatchUpOnce MissedRunPolicy = "catch_up_once"
	// SkipMissed runs a slot only if a leader reaches it within LeaderTTL
	// of its time; older slots are skipped and the schedule moves on.
	SkipMissed MissedRunPolicy = "skip"
)

// PeriodicJob is a job enqueued on a schedule, once per slot in the whole
// fleet. Its next slot is stored in the database (leasehold_periodic), so a
// restart never skips one; a leader elected through a lease row enqueues it,
// and the slot's job and the schedule's advance commit in one transaction
// fenced by the leader's token: two clients never enqueue the same slot.
type PeriodicJob struct {
	// Name identifies the schedule in the database: letters, digits and
	// _ - . : / (max 128 bytes), unique among the periodic jobs.
	Name string
	// Schedule gives the slots; see package cron.
	Schedule Schedule
	// Job returns the job to insert for the slot (its time on the
	// schedule, UTC). Options may be nil. The job's unique key is set to
	// "periodic:<name>:<slot in RFC 3339>"; ScheduledAt is kept when set.
	Job func(slot time.Time) (JobArgs, *InsertOpts)
	// MissedRuns is the policy for slots that passed unseen; default CatchUpOnce.
	MissedRuns MissedRunPolicy
}

func validatePeriodicJobs(jobs []*PeriodicJob) error {
	seen := map[string]bool{}
	for i, j := range jobs {
		switch {
		case j == nil:
			return fmt.Errorf("periodic job %d is nil", i)
		case j.Schedule == nil:
			return fmt.Errorf("periodic job %q: Schedule is nil", j.Name)
		case j.Job == nil:
			return fmt.Errorf("periodic job %q: Job is nil", j.Name)
		case j.MissedRuns != "" && j.MissedRuns != CatchUpOnce && j.MissedRuns != SkipMissed:
			return fmt.Errorf("periodic job %q: unknown MissedRuns %q (want %s or %s)", j.Name, j.MissedRuns, CatchUpOnce, SkipMissed)
		case seen[j.Name]:
			return fmt.Errorf("periodic job %q is configured twice", j.Name)
		}
		if err := validateName("periodic job name", j.Name); err != nil {
			return err
		}
		seen[j.Name] = true
	}
	return nil
}

// periodicScheduler is the loop every client with periodic jobs runs: it
// competes for the periodic leader lease and, while it holds it, enqueues
// the due slots.
type periodicScheduler struct {
	core    *clientCore
	jobs    []*PeriodicJob
	elector *elector
	ensured bool // schedule rows registered since this client became leader
}

func (s *periodicScheduler) run(ctx context.Context) {
	defer s.elector.resign()
	timer := time.NewTimer(0)
	defer timer.Stop()
	var failingSince time.Time // the leader's first failed round since its last success
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wait := s.elector.wait()
		if token := s.elector.attempt(ctx); token != 0 {
			wait = s.elector.wait()
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
				s.core.logger.Warn("leasehold: enqueue periodic jobs", "error", err)
				s.ensured = false
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				// A leader that can renew its lease but not enqueue (a
				// failing transaction, a broken insert) would hold the
				// schedules hostage: after a lease's worth of failures it
				// steps down and sits out one lease, so another client
				// can take over.
				if time.Since(failingSince) > s.elector.ttl {
					s.core.logger.Warn("leasehold: periodic leader stepping down after failing for its lease TTL", "ttl", s.elector.ttl)
					s.elector.resign()
					failingSince = time.Time{}
					wait = s.elector.ttl
				} else {
					wait = min(wait, s.elector.ttl/6)
				}
			}
		} else {
			s.ensured = false
			failingSince = time.Time{}
		}
		timer.Reset(max(wait, 10*time.Millisecond))
	}
}

// enqueueDue registers the schedules (first time as leader), enqueues every
// due slot, and returns when the next slot falls due (local clock).
func (s *periodicScheduler) enqueueDue(ctx context.Context, token int64) (time.Time, error) {
	exec := s.core.exec
	dbNow, err := exec.Now(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if !s.ensured {
		for _, j := range s.jobs {
			first := microUTC(j.Schedule.Next(dbNow))
			if first.IsZero() {
				return time.Time{}, fmt.Errorf("periodic job %q: schedule %q has no slot after %s", j.Name, j.Schedule, dbNow)
			}
			if _, err := exec.PeriodicEnsure(ctx, &driver.PeriodicEnsureParams{Name: j.Name, Spec: j.Schedule.String(), NextRunAt: first}); err != nil {
				return time.Time{}, fmt.Errorf("register periodic job %q: %w", j.Name, err)
			}
		}
		s.ensured = true
	}
	rows, err := exec.PeriodicList(ctx)
	if err != nil {
		return time.Time{}, err
	}
	byName := make(map[string]*leasetype.PeriodicSchedule, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	next := dbNow.Add(time.Hour)
	for _, j := range s.jobs {
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
func (s *periodicScheduler) fire(ctx context.Context, j *PeriodicJob, row *leasetype.PeriodicSchedule, dbNow time.Time, token int64) (time.Time, error) {
	// The latest slot that is due; the earlier ones were missed.
	slot, missed := row.NextRunAt, 0
	for missed < maxCatchUpSlots {
		n := j.Schedule.Next(slot)
		if n.IsZero() || n.After(dbNow) {
			break
		}
		slot, missed = n, missed+1
	}
	next := microUTC(j.Schedule.Next(slot))
	if next.IsZero() || !next.After(dbNow) {
		// A schedule with no more slots (or a walk cut short): look again later.
		next = microUTC(dbNow.Add(time.Hour))
	}
	run := true
	if j.MissedRuns == SkipMissed && (missed > 0 || dbNow.Sub(slot) > s.core.cfg.LeaderTTL) {
		run = false
	}

	tx, err := s.core.exec.Begin(ctx)
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var jobID int64
	var queue string
	if run {
		args, opts := j.Job(slot)
		o := InsertOpts{}
		if opts != nil {
			o = *opts
		}
		o.UniqueKey = "periodic:" + j.Name + ":" + slot.UTC().Format(time.RFC3339Nano)
		meta := map[string]any{}
		for k, v := range o.Metadata {
			meta[k] = v
		}
		meta["periodic"], meta["periodic_slot"] = j.Name, slot.UTC().Format(time.RFC3339Nano)
		if missed > 0 {
			meta["periodic_missed"] = missed
		}
		o.Metadata = meta
		err := s.core.withInsertMiddleware(ctx, []InsertManyParams{{Args: args, InsertOpts: &o}}, func(ctx context.Context, ps []*driver.JobInsertParams) error {
			res, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: ps})
			if err != nil {
				return fmt.Errorf("insert slot %s: %w", slot.Format(time.RFC3339), err)
			}
			jobID, queue = res[0].Job.ID, res[0].Job.Queue
			return nil
		})
		if err != nil {
			return time.Time{}, err
		}
	}
	ok, err := tx.PeriodicAdvance(ctx, &driver.PeriodicAdvanceParams{
		Name: j.Name, From: row.NextRunAt, Next: next, SlotAt: microUTC(slot), LastJobID: jobID,
		LeaderName: leaderPeriodic, LeaderToken: token,
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
	if run {
		s.core.stats.periodicEnqueued.Add(1)
		s.core.wakeQueue(queue)
	}
	return next, nil
}

// microUTC is t in UTC at the microsecond, the precision every backend
// stores, so that a time read back compares equal to the one written.
func microUTC(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}
