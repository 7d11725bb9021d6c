/*
Package leaseholdotel traces leasehold jobs with OpenTelemetry, from the
request that inserts a job to the worker that runs it.

The Middleware wraps every insert call in a "leasehold.insert" span and
writes that span's context into each job's metadata (with the W3C
TraceContext propagator the keys are "traceparent" and "tracestate"). The
worker reads it back and runs the handler in a "leasehold.work <kind>" span,
a child of the insert span, so one trace shows the request, the insert and
every attempt of the job, each with its job ID, kind, queue, attempt, lease
token and owner, and the handler's error if any.

Wire it in Config.Middleware, on the clients that insert and on those that
work:

	tracing := leaseholdotel.New(&leaseholdotel.Options{
		TracerProvider: tp,                          // default otel.GetTracerProvider()
		Propagator:     propagation.TraceContext{},  // default the global one, else W3C
	})
	client, err := leasehold.NewClient(driver, &leasehold.Config{
		Workers:    workers,
		Middleware: []leasehold.Middleware{tracing, metrics},
	})

	// In a request handler: the job joins the request's trace.
	_, err = client.Insert(r.Context(), ChargeArgs{PaymentID: id}, nil)

	// In the worker, ctx carries the work span:
	func (w *ChargeWorker) Work(ctx context.Context, job *leasehold.Job[ChargeArgs]) error {
		ctx, span := tracer.Start(ctx, "psp.charge") // a child of leasehold.work charge
		defer span.End()
		...
	}

The first middleware is outermost: put the tracing middleware before a
metrics middleware to have the work span cover it too.

With Options.LinkToInsert each attempt starts a new trace linked to the
insert span instead: better for jobs that run hours after the request, or
for a request that fans out into thousands of jobs.

The trace context is carried in the job's metadata, so it survives restarts
and crosses processes: any client with this middleware continues the trace.
A job inserted without the middleware, or whose metadata has no trace
context, starts a new trace when worked.
*/
package leaseholdotel
