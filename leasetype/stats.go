package leasetype

import "time"

// QueueStateCount is the number of jobs in one queue and state.
type QueueStateCount struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// State is the jobs' state.
	State JobState `json:"state"`
	// Count is how many jobs of Queue are in State.
	Count int64 `json:"count"`
}

// ThroughputCount is the number of attempts of one queue that ended in one
// minute with one outcome.
type ThroughputCount struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// Minute is the minute the attempts ended in, truncated, in UTC.
	Minute time.Time `json:"minute"`
	// Outcome is how the attempts ended.
	Outcome AttemptOutcome `json:"outcome"`
	// Count is how many attempts of Queue ended in Minute with Outcome.
	Count int64 `json:"count"`
}

// QueueBacklog is the claimable backlog of one queue.
type QueueBacklog struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// Available is how many jobs can be claimed now.
	Available int64 `json:"available"`
	// OldestAge is how long the oldest claimable job has been due.
	OldestAge time.Duration `json:"oldest_age"`
}
