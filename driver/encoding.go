package driver

import "github.com/leasehold/leasehold/leasetype"

// The bits of the unique_finished column: each names a finished state in
// which a job keeps holding its unique key (JobInsertParams.UniqueFinished).
// The backends' unique indexes test the same bits.
const (
	UniqueFinishedCompleted = 1
	UniqueFinishedDiscarded = 2
	UniqueFinishedCancelled = 4
)

// UniqueFinishedMask encodes the finished states in which a job keeps its
// unique key as the unique_finished bitmask. Other states are ignored: the
// client validates the list, and unfinished states hold the key anyway.
func UniqueFinishedMask(states []leasetype.JobState) int {
	mask := 0
	for _, s := range states {
		switch s {
		case leasetype.JobStateCompleted:
			mask |= UniqueFinishedCompleted
		case leasetype.JobStateDiscarded:
			mask |= UniqueFinishedDiscarded
		case leasetype.JobStateCancelled:
			mask |= UniqueFinishedCancelled
		}
	}
	return mask
}

// EmptyMetadata is the metadata stored for a job inserted without any: the
// empty JSON object.
const EmptyMetadata = "{}"

// MetadataOrEmpty returns m, or EmptyMetadata when m is empty.
func MetadataOrEmpty(m []byte) []byte {
	if len(m) == 0 {
		return []byte(EmptyMetadata)
	}
	return m
}
