package leasehold

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// Middleware is a value in Config.Middleware: tracing and metrics packages
// plug in here. Besides IsMiddleware (embed MiddlewareDefaults to get it),
// a middleware implements one or more of InsertMiddleware, WorkMiddleware
// and HeartbeatObserver; the client finds each by type assertion, and
// NewClient refuses a middleware that implements none of them.
type Middleware interface {
	// IsMiddleware marks the type as meant for Config.Middleware.
	IsMiddleware() bool
}

// MiddlewareDefaults implements Middleware; embed it in a middleware type.
type MiddlewareDefaults struct{}

// IsMiddleware returns true.
func (MiddlewareDefaults) IsMiddleware() bool { return true }

// InsertMiddleware sees every insert call before it reaches the database.
// It may change the jobs' options (typically adding metadata, such as a trace
// context) and must call next to insert; it may wrap the call (a span).
type InsertMiddleware interface {
	InsertMany(ctx context.Context, jobs []*InsertJob, next func(ctx context.Context) error) error
}

// InsertJob is a job on its way to the database, as seen by InsertMiddleware.
type InsertJob struct {
	// Args are the job's arguments.
	Args JobArgs
	// Opts are the caller's options; Metadata is a copy the middleware may change.
	Opts InsertOpts
}

// WorkMiddleware wraps every handler call. It must call next, with a context
// derived from ctx, to run the handler, and return its error (or another).
// job is the claimed row; it must not be changed.
type WorkMiddleware interface {
	Work(ctx context.Context, job *leasetype.JobRow, next func(ctx context.Context) error) error
}

// HeartbeatObserver is told about every batched lease renewal: how many
// leases it carried, its round-trip time and its error.
type HeartbeatObserver interface {
	ObserveHeartbeat(leases int, rtt time.Duration, err error)
}

// middlewares holds the configured middleware sorted by capability.
type middlewares struct {
	insert    []InsertMiddleware
	work      []WorkMiddleware
	heartbeat []HeartbeatObserver
}

func newMiddlewares(ms []Middleware) (middlewares, error) {
	var out middlewares
	for i, m := range ms {
		ok := false
		if im, is := m.(InsertMiddleware); is {
			out.insert, ok = append(out.insert, im), true
		}
		if wm, is := m.(WorkMiddleware); is {
			out.work, ok = append(out.work, wm), true
		}
		if ho, is := m.(HeartbeatObserver); is {
			out.heartbeat, ok = append(out.heartbeat, ho), true
		}
		if !ok {
			return out, fmt.Errorf("%w: Middleware[%d] (%T) implements none of InsertMiddleware, WorkMiddleware, HeartbeatObserver", ErrInvalidConfig, i, m)
		}
	}
	return out, nil
}

// wrapInsert runs the insert middleware around insert, first configured outermost.
func (m middlewares) wrapInsert(ctx context.Context, jobs []*InsertJob, insert func(ctx context.Context) error) error {
	next := insert
	for i := len(m.insert) - 1; i >= 0; i-- {
		mw, inner := m.insert[i], next
		next = func(ctx context.Context) error { return mw.InsertMany(ctx, jobs, inner) }
	}
	return next(ctx)
}

// wrapWork runs the work middleware around work, first configured outermost.
func (m middlewares) wrapWork(ctx context.Context, row *leasetype.JobRow, work func(ctx context.Context) error) error {
	next := work
	for i := len(m.work) - 1; i >= 0; i-- {
		mw, inner := m.work[i], next
		next = func(ctx context.Context) error { return mw.Work(ctx, row, inner) }
	}
	return next(ctx)
}

func (m middlewares) observeHeartbeat(leases int, rtt time.Duration, err error) {
	for _, o := range m.heartbeat {
		o.ObserveHeartbeat(leases, rtt, err)
	}
}

// insertJobs turns insert parameters into the jobs middleware sees, with
// metadata maps the middleware may change without touching the caller's.
func insertJobs(params []InsertManyParams) []*InsertJob {
	jobs := make([]*InsertJob, len(params))
	for i, p := range params {
		j := &InsertJob{Args: p.Args}
		if p.InsertOpts != nil {
			j.Opts = *p.InsertOpts
			j.Opts.Metadata = maps.Clone(p.InsertOpts.Metadata)
		}
		jobs[i] = j
	}
	return jobs
}
