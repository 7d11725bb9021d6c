package leasehold

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Match them with errors.Is.
var (
	// ErrNotFound is returned when no job has the given ID.
	ErrNotFound = errors.New("leasehold: job not found")
	// ErrInvalidArgs is wrapped by every error about bad input (names, sizes,
	// options of an insert or an operator action); nothing is written when it
	// is returned.
	ErrInvalidArgs = errors.New("leasehold: invalid argument")
	// ErrInvalidConfig is wrapped by every configuration error from NewClient.
	ErrInvalidConfig = errors.New("leasehold: invalid config")
	// ErrNotStarted is returned by Stop on a client that was never started.
	ErrNotStarted = errors.New("leasehold: client not started")
	// ErrAlreadyStarted is returned by Start on a running client.
	ErrAlreadyStarted = errors.New("leasehold: client already started")
	// ErrNoWorkers is returned by Start on a client configured without workers.
	ErrNoWorkers = errors.New("leasehold: client has no workers and cannot work jobs")
	// ErrClientStopping is the cause of a handler's context cancelled by
	// StopAndCancel or by Stop after its context ended.
	ErrClientStopping = errors.New("leasehold: client stopping")
	// ErrJobCancelled is the cause of a handler's context cancelled because
	// JobCancel was called on its running job.
	ErrJobCancelled = errors.New("leasehold: job cancelled by request")
	// ErrJobState is wrapped when an operator action does not apply to the
	// job's current state (retrying a running job, resolving a job that is not stuck).
	ErrJobState = errors.New("leasehold: action not allowed in job's state")
	// ErrUniqueConflict is wrapped when an operator action would give a job
	// its unique key back while another job holds it (retrying a cancelled
	// job whose key a newer job has taken). Nothing is changed.
	ErrUniqueConflict = errors.New("leasehold: unique key held by another job")
	// ErrUnknownKind is recorded on the attempt of a job whose kind has no
	// worker on the client that claimed it. The job is retried with backoff
	// so that a later deploy can work it.
	ErrUnknownKind = errors.New("leasehold: no worker registered for job kind")
)

// LeaseLostError says a worker no longer holds a job's lease: its renewal or
// completion was refused because the fencing token is no longer current, the
// job is no longer running, or the lease expired on the database clock; or
// the database could not be reached before the worker's local deadline.
// After it, the worker's writes for this job are rejected.
//
// It is the cause of the handler's context when the lease is lost
// (context.Cause(ctx)), and the error CompleteTx returns for a stale lease.
type LeaseLostError struct {
	// JobID is the job whose lease was lost.
	JobID int64
	// Token is the fencing token the worker held.
	Token int64
	// Reason says how it was lost.
	Reason string
}

// Error implements error.
func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("leasehold: lease lost on job %d (token %d): %s", e.JobID, e.Token, e.Reason)
}

// IsLeaseLost reports whether err is or wraps a *LeaseLostError.
func IsLeaseLost(err error) bool {
	var lle *LeaseLostError
	return errors.As(err, &lle)
}

// permanentError marks a handler error that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps a handler error so that the job is discarded at once
// instead of retried (a card decline, a malformed request).
func Permanent(err error) error {
	if err == nil {
		err = errors.New("permanent failure")
	}
	return &permanentError{err: err}
}

// cancelError marks a handler's request to cancel its job.
type cancelError struct{ err error }

func (e *cancelError) Error() string { return "cancelled: " + e.err.Error() }
func (e *cancelError) Unwrap() error { return e.err }

// Cancel returns an error that, returned from a handler, cancels the job:
// it moves to the cancelled state and never runs again unless retried by
// hand. err says why.
func Cancel(err error) error {
	if err == nil {
		err = errors.New("cancelled by handler")
	}
	return &cancelError{err: err}
}

// snoozeError asks for the job to run again later without counting an error.
type snoozeError struct{ d time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("snoozed for %s", e.d) }

// Snooze returns an error that, returned from a handler, schedules the job
// to run again after d. A snooze counts neither as an error nor against
// MaxAttempts.
func Snooze(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	return &snoozeError{d: d}
}
