package leaseholdotel

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// ScopeName is the instrumentation scope of the tracer the middleware uses.
const ScopeName = "github.com/leasehold/leasehold/leaseholdotel"

// defaultQueue is the queue a job goes to when neither its options nor its
// args name one; it mirrors the core's default.
const defaultQueue = leasehold.DefaultQueue

// Attribute keys set on the spans, besides the messaging.* ones of the
// OpenTelemetry semantic conventions.
const (
	// AttrJobID is the job's ID (work spans).
	AttrJobID = attribute.Key("leasehold.job.id")
	// AttrJobKind is the job's kind; on an insert span, set when every job has the same kind.
	AttrJobKind = attribute.Key("leasehold.job.kind")
	// AttrJobKinds lists the distinct kinds of a batch insert of several kinds.
	AttrJobKinds = attribute.Key("leasehold.job.kinds")
	// AttrJobCount is the number of jobs in an insert call.
	AttrJobCount = attribute.Key("leasehold.job.count")
	// AttrJobAttempt is the attempt number of a work span (1 for the first).
	AttrJobAttempt = attribute.Key("leasehold.job.attempt")
	// AttrQueue is the job's queue; on an insert span, set when every job has the same queue.
	AttrQueue = attribute.Key("leasehold.queue")
	// AttrQueues lists the distinct queues of a batch insert into several queues.
	AttrQueues = attribute.Key("leasehold.queues")
	// AttrLeaseToken is the fencing token of the lease a work span runs under.
	AttrLeaseToken = attribute.Key("leasehold.lease.token")
	// AttrLeaseOwner is the lease owner ("host:pid:client-id") of a work span.
	AttrLeaseOwner = attribute.Key("leasehold.lease.owner")
	// AttrLeaseLost is set to true on a work span whose lease was lost while the handler ran.
	AttrLeaseLost = attribute.Key("leasehold.lease.lost")
)

const (
	attrMsgSystem  = attribute.Key("messaging.system")
	attrMsgOp      = attribute.Key("messaging.operation.type")
	attrMsgDest    = attribute.Key("messaging.destination.name")
	attrMsgBatch   = attribute.Key("messaging.batch.message_count")
	msgSystemValue = "leasehold"
	insertSpanName = "leasehold.insert"
	workSpanPrefix = "leasehold.work "
)

// Options configure the Middleware. The zero value, or nil, gives the defaults.
type Options struct {
	// TracerProvider creates the tracer; default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into each job's metadata at insert
	// and reads it back at work. Default: the global propagator
	// (otel.GetTextMapPropagator()) when one is set, else the W3C
	// TraceContext propagator, so that the trace travels even in a program
	// that never configured propagation.
	Propagator propagation.TextMapPropagator
	// LinkToInsert starts each work span as the root of a new trace with a
	// link to the inserting span, instead of as its child. Use it when jobs
	// often run long after the request that inserted them, or when one
	// request fans out to many jobs, to keep traces short.
	LinkToInsert bool
}

// Middleware traces leasehold inserts and handler calls with OpenTelemetry
// and carries the trace context from the inserting code to the worker in
// the job's metadata. It implements leasehold.InsertMiddleware and
// leasehold.WorkMiddleware; put it in Config.Middleware. It is safe for
// concurrent use.
type Middleware struct {
	leasehold.MiddlewareDefaults
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	link       bool
}

var (
	_ leasehold.Middleware       = (*Middleware)(nil)
	_ leasehold.InsertMiddleware = (*Middleware)(nil)
	_ leasehold.WorkMiddleware   = (*Middleware)(nil)
)

// New returns a tracing middleware; opts may be nil.
func New(opts *Options) *Middleware {
	var o Options
	if opts != nil {
		o = *opts
	}
	tp := o.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Middleware{tracer: tp.Tracer(ScopeName), propagator: o.Propagator, link: o.LinkToInsert}
}

// textMap returns the propagator in force; see Options.Propagator.
func (m *Middleware) textMap() propagation.TextMapPropagator {
	if m.propagator != nil {
		return m.propagator
	}
	if global := otel.GetTextMapPropagator(); len(global.Fields()) > 0 {
		return global
	}
	return propagation.TraceContext{}
}

// InsertMany implements leasehold.InsertMiddleware. It wraps the insert in
// a producer span named "leasehold.insert", child of the span in ctx, and
// writes that span's context into every job's metadata (with the W3C
// propagator, under "traceparent" and "tracestate"), replacing any trace
// context the metadata already had.
func (m *Middleware) InsertMany(ctx context.Context, jobs []*leasehold.InsertJob, next func(ctx context.Context) error) error {
	var kinds, queues []string
	for _, j := range jobs {
		kinds = append(kinds, j.Args.Kind())
		queues = append(queues, insertQueue(j))
	}
	slices.Sort(kinds)
	slices.Sort(queues)
	kinds, queues = slices.Compact(kinds), slices.Compact(queues)

	attrs := []attribute.KeyValue{
		attrMsgSystem.String(msgSystemValue), attrMsgOp.String("send"), AttrJobCount.Int(len(jobs)),
	}
	if len(jobs) > 1 {
		attrs = append(attrs, attrMsgBatch.Int(len(jobs)))
	}
	if len(kinds) == 1 {
		attrs = append(attrs, AttrJobKind.String(kinds[0]))
	} else if len(kinds) > 1 {
		attrs = append(attrs, AttrJobKinds.StringSlice(kinds))
	}
	if len(queues) == 1 {
		attrs = append(attrs, AttrQueue.String(queues[0]), attrMsgDest.String(queues[0]))
	} else if len(queues) > 1 {
		attrs = append(attrs, AttrQueues.StringSlice(queues))
	}
	ctx, span := m.tracer.Start(ctx, insertSpanName, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(attrs...))
	defer span.End()

	carrier := propagation.MapCarrier{}
	m.textMap().Inject(ctx, carrier)
	if len(carrier) > 0 {
		for _, j := range jobs {
			if j.Opts.Metadata == nil {
				j.Opts.Metadata = make(map[string]any, len(carrier))
			}
			for k, v := range carrier {
				j.Opts.Metadata[k] = v
			}
		}
	}
	err := next(ctx)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// insertQueue is the queue a job is inserted into, as the client resolves
// it: the options', else the args' own, else the default queue.
func insertQueue(j *leasehold.InsertJob) string {
	if j.Opts.Queue != "" {
		return j.Opts.Queue
	}
	if a, ok := j.Args.(leasehold.JobArgsWithInsertOpts); ok {
		if q := a.InsertOpts().Queue; q != "" {
			return q
		}
	}
	return defaultQueue
}

// Work implements leasehold.WorkMiddleware. It reads the trace context from
// the job's metadata and runs the handler inside a consumer span named
// "leasehold.work <kind>", a child of the inserting span (or linked to it,
// with Options.LinkToInsert). The handler's ctx carries the span. A handler
// error is recorded on the span with an error status; so is a panic, which
// then continues to the client.
func (m *Middleware) Work(ctx context.Context, job *leasetype.JobRow, next func(ctx context.Context) error) (err error) {
	ctx = m.textMap().Extract(ctx, metadataCarrier(job.Metadata))
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attrMsgSystem.String(msgSystemValue), attrMsgOp.String("process"), attrMsgDest.String(job.Queue),
			AttrJobID.Int64(job.ID), AttrJobKind.String(job.Kind), AttrQueue.String(job.Queue),
			AttrJobAttempt.Int(job.Attempt), AttrLeaseToken.Int64(job.LeaseToken), AttrLeaseOwner.String(job.LeaseOwner),
		),
	}
	if m.link {
		opts = append(opts, trace.WithNewRoot())
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, span := m.tracer.Start(ctx, workSpanPrefix+job.Kind, opts...)
	panicked := true
	defer func() {
		if panicked {
			// Recorded on the way through; the panic keeps unwinding to the
			// client, which records the attempt as panicked.
			r := recover()
			if r == nil {
				// runtime.Goexit, not a panic: let it go on.
				span.SetStatus(codes.Error, "handler exited its goroutine")
				span.End()
				return
			}
			perr := fmt.Errorf("panic: %v", r)
			span.RecordError(perr, trace.WithStackTrace(true))
			span.SetStatus(codes.Error, perr.Error())
			span.End()
			panic(r)
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		if leasehold.IsLeaseLost(context.Cause(ctx)) {
			span.SetAttributes(AttrLeaseLost.Bool(true))
		}
		span.End()
	}()
	err = next(ctx)
	panicked = false
	return err
}

// metadataCarrier returns the string values of a job's metadata, a JSON
// object, as a carrier; anything else gives an empty one.
func metadataCarrier(metadata []byte) propagation.MapCarrier {
	carrier := propagation.MapCarrier{}
	if len(metadata) == 0 {
		return carrier
	}
	var meta map[string]any
	if json.Unmarshal(metadata, &meta) != nil {
		return carrier
	}
	for k, v := range meta {
		if s, ok := v.(string); ok {
			carrier[k] = s
		}
	}
	return carrier
}
