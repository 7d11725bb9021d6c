package leasehold

import (
	"fmt"
	"time"
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
