package leasehold

import (
	"fmt"
	"time"
)

// Retention says how long finished jobs and attempt history are kept. The
// maintenance leader (one client of the fleet at a time, elected through a
// lease row) deletes what is older, in batches. A zero field takes its
// default; a negative one keeps rows forever. Stuck jobs are never pruned:
// they wait for an operator. The attempt history has its own retention, so
// it can outlive the jobs (an audit trail) or be pruned sooner.
type Retention struct {
	// Completed keeps completed jobs this long after they finished; default 24 h.
	Completed time.Duration
	// Cancelled keeps cancelled jobs; default 7 days.
	Cancelled time.Duration
	// Discarded keeps discarded jobs; default 7 days.
	Discarded time.Duration
	// Attempts keeps attempt rows this long after their lease ended; default 30 days.
	Attempts time.Duration
	// Interval is how often the leader prunes; default 1 minute.
	Interval time.Duration
}

const day = 24 * time.Hour

func (r Retention) withDefaults() Retention {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&r.Completed, day)
	def(&r.Cancelled, 7*day)
	def(&r.Discarded, 7*day)
	def(&r.Attempts, 30*day)
	def(&r.Interval, time.Minute)
	return r
}

func (r Retention) validate() error {
	if r.Interval < 0 {
		return fmt.Errorf("retention Interval %s is negative", r.Interval)
	}
	return nil
}

// enabled reports whether anything is ever pruned.
func (r Retention) enabled() bool {
	return r.Completed >= 0 || r.Cancelled >= 0 || r.Discarded >= 0 || r.Attempts >= 0
}
