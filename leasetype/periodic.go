package leasetype

import "time"

// PeriodicSchedule is a periodic job's stored state: its spec, the next slot
// a leader will enqueue, and the last slot enqueued with its job.
type PeriodicSchedule struct {
	// Name is the periodic job's name.
	Name string
	// Spec is its schedule as text.
	Spec string
	// NextRunAt is the next slot the periodic leader will enqueue.
	NextRunAt time.Time
	// LastRunAt is the last slot enqueued; nil before the first.
	LastRunAt *time.Time
	// LastJobID is the job of the last slot; nil when none was recorded.
	LastJobID *int64
	// UpdatedAt is when the row last changed, on the database clock.
	UpdatedAt time.Time
}
