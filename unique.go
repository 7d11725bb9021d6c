package leasehold

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// UniqueOpts makes a job unique by what it is rather than by a key the
// caller names. The fields chosen are hashed, with the kind, into the job's
// unique key; the database's unique index then allows one job per key:
//
//   - while a job with the key is available, scheduled, running, retryable
//     or stuck, inserting another returns the existing job with
//     UniqueSkipped set, under any concurrency (an index, not a lookup);
//   - ByState adds finished states (completed, discarded, cancelled) in
//     which the job keeps holding its key, e.g. [completed] for "never
//     again once done" — until retention prunes the finished job;
//   - a key is never held by a job in a state outside those.
//
// The zero UniqueOpts does nothing; InsertOpts.UniqueKey alone keeps its
// meaning (an idempotency key you name). When both are set the key is
// hashed in too.
type UniqueOpts struct {
	// ByArgs includes the encoded arguments: two jobs are the same when
	// their JSON encodings are byte for byte the same (struct fields encode
	// in declaration order, map keys sorted).
	ByArgs bool
	// ByQueue includes the queue, so the same job may wait in two queues.
	ByQueue bool
	// ByPeriod includes the period the job falls in: its ScheduledAt, or
	// the inserting client's clock when it has none, truncated to ByPeriod
	// (periods are aligned to the Unix epoch, so every client agrees).
	ByPeriod time.Duration
	// ByState lists the finished states that also hold the key: any of
	// completed, discarded, cancelled. It applies to UniqueKey alone too.
	ByState []leasetype.JobState
}

// isZero reports whether the options derive nothing.
func (u UniqueOpts) isZero() bool {
	return !u.ByArgs && !u.ByQueue && u.ByPeriod == 0 && len(u.ByState) == 0
}

// derives reports whether the options build the key (rather than only
// extending the states of a named one).
func (u UniqueOpts) derives() bool { return u.ByArgs || u.ByQueue || u.ByPeriod != 0 }

// validate checks the options before anything is written.
func (u UniqueOpts) validate() error {
	if u.ByPeriod < 0 || u.ByPeriod > 0 && u.ByPeriod < time.Second {
		return fmt.Errorf("%w: unique ByPeriod %s must be at least 1s", ErrInvalidArgs, u.ByPeriod)
	}
	for _, s := range u.ByState {
		switch s {
		case leasetype.JobStateCompleted, leasetype.JobStateDiscarded, leasetype.JobStateCancelled:
		default:
			return fmt.Errorf("%w: unique ByState %q: only completed, discarded and cancelled may be added (unfinished jobs always hold their key)", ErrInvalidArgs, s)
		}
	}
	return nil
}

// uniqueKey derives the stored key: "<kind>:u:<32 hex digits of SHA-256>"
// over the chosen parts. It stays readable by kind in listings and short
// enough for every backend's index.
func (u UniqueOpts) uniqueKey(kind, queue, named string, encodedArgs []byte, at time.Time) string {
	h := sha256.New()
	part := func(name string, value []byte) {
		// Length-prefixed, so no two different part lists hash alike.
		h.Write([]byte(name))
		h.Write([]byte(strconv.Itoa(len(value))))
		h.Write([]byte{':'})
		h.Write(value)
	}
	part("kind", []byte(kind))
	if named != "" {
		part("key", []byte(named))
	}
	if u.ByQueue {
		part("queue", []byte(queue))
	}
	if u.ByArgs {
		part("args", encodedArgs)
	}
	if u.ByPeriod > 0 {
		start := epochTruncate(at, u.ByPeriod)
		part("period", []byte(strconv.FormatInt(start.UnixMicro(), 10)+"/"+u.ByPeriod.String()))
	}
	return kind + ":u:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// finishedStates returns ByState deduplicated in a stable order.
func (u UniqueOpts) finishedStates() []leasetype.JobState {
	if len(u.ByState) == 0 {
		return nil
	}
	out := slices.Clone(u.ByState)
	slices.Sort(out)
	return slices.Compact(out)
}

// epochTruncate rounds t down to a multiple of d since the Unix epoch
// (time.Truncate counts from year 1, which differs for periods such as a
// week), so that every client computes the same periods.
func epochTruncate(t time.Time, d time.Duration) time.Time {
	if d <= 0 {
		return t
	}
	ns := t.UnixNano()
	r := ns % int64(d)
	if r < 0 {
		r += int64(d)
	}
	return time.Unix(0, ns-r).UTC()
}
