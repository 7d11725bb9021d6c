package leasehold

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/leasehold/leasehold/leasetype"
)

// Worker works jobs of one kind.
type Worker[T JobArgs] interface {
	// Work runs one attempt of a job. Returning nil completes the job;
	// returning an error retries it with backoff (or discards it after
	// MaxAttempts errors); Permanent, Cancel and Snooze change that.
	//
	// ctx is cancelled when the lease is lost (context.Cause is a
	// *LeaseLostError), when the client stops with StopAndCancel, or at the
	// worker's Timeout. A handler that sees ctx done must stop making outside
	// effects: another worker may already hold the job.
	Work(ctx context.Context, job *Job[T]) error
}

// WorkFunc adapts a function to a Worker.
type WorkFunc[T JobArgs] func(ctx context.Context, job *Job[T]) error

// Work calls f.
func (f WorkFunc[T]) Work(ctx context.Context, job *Job[T]) error { return f(ctx, job) }

// WorkerOpts configures one kind's worker. Zero fields take the client's defaults.
type WorkerOpts struct {
	// LeaseTTL is the lease duration of this kind's jobs (a job's own
	// InsertOpts.LeaseTTL wins). It must exceed the longest pause between
	// two heartbeats you expect, not the job's run time: leases are renewed.
	LeaseTTL time.Duration
	// ExpiryPolicy says what happens when a lease of this kind expires:
	// retry (the default) or stuck. Use stuck for work with outside effects
	// that must not be repeated blindly.
	ExpiryPolicy leasetype.ExpiryPolicy
	// MaxAttempts is the default for this kind's jobs inserted by a client
	// that has this worker registered.
	MaxAttempts int
	// Retry computes the delay before the next attempt after an error.
	Retry RetryPolicy
	// Timeout, when positive, cancels the handler's context after it.
	Timeout time.Duration
	// GlobalLimit, when positive, bounds how many jobs of this kind run at
	// once across every client and queue (e.g. at most 5 charges to one
	// payment provider in the whole fleet). It is enforced inside the claim:
	// a claimer locks the kind's limit row, counts the running jobs, and
	// claims only what fits, in one transaction. An expired lease frees its
	// slot once reclaimed, which the claim that finds it does first, so a
	// crashed worker does not hold one. Every client with this worker should
	// set the same value: each enforces its own.
	GlobalLimit int
	// KeyBy derives a job's key (InsertOpts.Key) from its args when the
	// insert sets none: JSON paths of object members, as "customer_id" or
	// "customer.id"; the values (strings, numbers or booleans) are joined by
	// "|". An insert whose args lack a value, or hold null, an object or an
	// array there, fails. It applies to inserts by a client that has this
	// worker registered.
	KeyBy []string
	// KeyLimit, when positive, bounds how many jobs of this kind with the
	// same key run at once across every client and queue ("one charge per
	// customer at a time" is 1). It is enforced inside the claim, as
	// GlobalLimit is: a job whose key is full is skipped, and an expired
	// lease frees its slot once the watcher reclaims it (within
	// Config.WatcherInterval). Jobs without a key are not key-limited.
	KeyLimit int
	// SequenceBy derives a job's sequence (InsertOpts.Sequence) from its
	// args, as KeyBy derives its key.
	SequenceBy []string
	// SequencePolicy says whether the jobs after one of this kind's jobs
	// that ended discarded or cancelled wait (SequenceBlock, the default)
	// or go on (SequenceContinue). It is the policy of the waiting job's
	// kind.
	SequencePolicy SequencePolicy
}

// Workers is the registry of workers a client runs. Add workers with
// AddWorker before passing it to NewClient.
type Workers struct {
	byKind map[string]*workerEntry
}

// NewWorkers returns an empty registry.
func NewWorkers() *Workers { return &Workers{byKind: map[string]*workerEntry{}} }

// workerEntry is a registered worker with its type erased.
type workerEntry struct {
	kind string
	opts WorkerOpts
	// keyBy and sequenceBy are opts.KeyBy and opts.SequenceBy parsed.
	keyBy, sequenceBy []keyPath
	// work decodes the row's arguments and runs the worker. A decode error is
	// returned wrapped in errDecode.
	work func(ctx context.Context, row *leasetype.JobRow) error
}

// errDecode marks a job whose arguments cannot be decoded; it is discarded.
type errDecode struct{ err error }

func (e *errDecode) Error() string { return "decode job args: " + e.err.Error() }
func (e *errDecode) Unwrap() error { return e.err }

// AddWorker registers w for the kind of T with default options. It panics
// when the kind is already registered or invalid, a programming error found
// at start-up; use AddWorkerSafely to get an error instead.
func AddWorker[T JobArgs](workers *Workers, w Worker[T]) {
	if err := AddWorkerSafely(workers, w, nil); err != nil {
		panic(err)
	}
}

// AddWorkerWithOpts registers w with options; it panics like AddWorker.
func AddWorkerWithOpts[T JobArgs](workers *Workers, w Worker[T], opts *WorkerOpts) {
	if err := AddWorkerSafely(workers, w, opts); err != nil {
		panic(err)
	}
}

// AddWorkerSafely registers w for the kind of T, with options (nil for the
// defaults), and returns an error for an invalid or duplicate kind or options.
func AddWorkerSafely[T JobArgs](workers *Workers, w Worker[T], opts *WorkerOpts) error {
	var zero T
	kind := zero.Kind()
	if err := validateName("kind", kind); err != nil {
		return err
	}
	if _, dup := workers.byKind[kind]; dup {
		return fmt.Errorf("%w: worker for kind %q is already registered", ErrInvalidConfig, kind)
	}
	o := WorkerOpts{}
	if opts != nil {
		o = *opts
	}
	if err := o.validate(kind); err != nil {
		return err
	}
	keyBy, err := parseKeyPaths("KeyBy", o.KeyBy)
	if err != nil {
		return fmt.Errorf("%w: worker %q: %w", ErrInvalidConfig, kind, err)
	}
	sequenceBy, err := parseKeyPaths("SequenceBy", o.SequenceBy)
	if err != nil {
		return fmt.Errorf("%w: worker %q: %w", ErrInvalidConfig, kind, err)
	}
	skipTrivial := decodesTriviallyToZero[T]()
	flat := newArgsDecoder(reflect.TypeFor[T]())
	workers.byKind[kind] = &workerEntry{
		kind:       kind,
		opts:       o,
		keyBy:      keyBy,
		sequenceBy: sequenceBy,
		work: func(ctx context.Context, row *leasetype.JobRow) error {
			// The arguments are decoded in place: one allocation for the
			// job, none for a copy of its arguments.
			job := &Job[T]{JobRow: row}
			if skipTrivial && isTrivialArgs(row.EncodedArgs) {
				return w.Work(ctx, job)
			}
			if flat != nil {
				if flat.decode(row.EncodedArgs, unsafe.Pointer(&job.Args)) {
					return w.Work(ctx, job)
				}
				var zero T
				job.Args = zero
			}
			if err := json.Unmarshal(row.EncodedArgs, &job.Args); err != nil {
				return &errDecode{err: err}
			}
			return w.Work(ctx, job)
		},
	}
	return nil
}

// decodesTriviallyToZero reports whether json.Unmarshal of an empty object
// or of null into a zero T leaves it zero and returns nil: T is a struct
// that decodes itself with none of encoding/json's hooks (UnmarshalJSON,
// or UnmarshalText, which refuses an object). Such args skip the decoder
// when they are trivial (isTrivialArgs): on a queue of jobs without
// arguments the decoding was a tenth of the client's CPU per job.
func decodesTriviallyToZero[T any]() bool {
	t := reflect.TypeFor[T]()
	return t.Kind() == reflect.Struct && !hasDecodeHook(t)
}

// isTrivialArgs reports whether encoded is exactly {} or null, which decode
// into a struct without hooks (decodesTriviallyToZero) as nothing at all.
// Any other spelling, with spaces say, goes through the decoder.
func isTrivialArgs(encoded []byte) bool {
	return string(encoded) == "{}" || string(encoded) == "null"
}

func (o WorkerOpts) validate(kind string) error {
	switch {
	case o.LeaseTTL < 0:
		return fmt.Errorf("%w: worker %q: LeaseTTL %s is negative", ErrInvalidConfig, kind, o.LeaseTTL)
	case o.LeaseTTL > 0 && o.LeaseTTL < minLeaseTTL:
		return fmt.Errorf("%w: worker %q: LeaseTTL %s is below the minimum %s", ErrInvalidConfig, kind, o.LeaseTTL, minLeaseTTL)
	case o.LeaseTTL > maxLeaseTTL:
		return fmt.Errorf("%w: worker %q: LeaseTTL %s is above the maximum %s", ErrInvalidConfig, kind, o.LeaseTTL, maxLeaseTTL)
	case o.ExpiryPolicy != "" && o.ExpiryPolicy != leasetype.ExpiryRetry && o.ExpiryPolicy != leasetype.ExpiryStuck:
		return fmt.Errorf("%w: worker %q: unknown ExpiryPolicy %q (want retry or stuck)", ErrInvalidConfig, kind, o.ExpiryPolicy)
	case o.MaxAttempts < 0 || o.MaxAttempts > maxAttemptsLimit:
		return fmt.Errorf("%w: worker %q: MaxAttempts %d is outside 0 to %d", ErrInvalidConfig, kind, o.MaxAttempts, maxAttemptsLimit)
	case o.Timeout < 0:
		return fmt.Errorf("%w: worker %q: Timeout %s is negative", ErrInvalidConfig, kind, o.Timeout)
	case o.GlobalLimit < 0:
		return fmt.Errorf("%w: worker %q: GlobalLimit %d is negative", ErrInvalidConfig, kind, o.GlobalLimit)
	case o.KeyLimit < 0:
		return fmt.Errorf("%w: worker %q: KeyLimit %d is negative", ErrInvalidConfig, kind, o.KeyLimit)
	case o.SequencePolicy != "" && o.SequencePolicy != SequenceBlock && o.SequencePolicy != SequenceContinue:
		return fmt.Errorf("%w: worker %q: unknown SequencePolicy %q (want block or continue)", ErrInvalidConfig, kind, o.SequencePolicy)
	}
	return nil
}
