package leasehold

import (
	"strconv"

	"github.com/leasehold/leasehold/leasetype"
)

// JobArgs is implemented by every job's argument type. The arguments are
// stored as JSON, so the type must marshal with encoding/json.
type JobArgs interface {
	// Kind names the job's type. It selects the worker and must be stable
	// across deploys: jobs already in the database keep it.
	Kind() string
}

// JobArgsWithInsertOpts is implemented by argument types that carry their
// own insert defaults (a queue, a priority). Options given at insert time
// override them field by field.
type JobArgsWithInsertOpts interface {
	JobArgs
	// InsertOpts returns the kind's default insert options.
	InsertOpts() InsertOpts
}

// Job is a job handed to a worker: the stored row and its decoded arguments.
type Job[T JobArgs] struct {
	// JobRow is the row as claimed, including the lease: LeaseToken is the
	// fencing token of this attempt.
	*leasetype.JobRow
	// Args are the decoded arguments.
	Args T
}

// Token returns the fencing token of the lease this attempt holds. Handlers
// pass it to their own fenced writes (for example a column compared in a
// conditional UPDATE) so that a stale attempt cannot overwrite a newer one.
func (j *Job[T]) Token() int64 { return j.LeaseToken }

// IdempotencyKey returns a key that is the same for every attempt of this job
// and different for every job, for outside calls that deduplicate requests
// (a payment provider's Idempotency-Key header). It is the job's unique key
// when it has one, else derived from its kind and ID.
func (j *Job[T]) IdempotencyKey() string { return IdempotencyKey(j.JobRow) }

// IdempotencyKey returns the stable idempotency key of a job row; see
// Job.IdempotencyKey.
func IdempotencyKey(row *leasetype.JobRow) string {
	if row.UniqueKey != "" {
		return row.UniqueKey
	}
	return row.Kind + ":" + strconv.FormatInt(row.ID, 10)
}
