package leaseholdotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdotel"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// A job inserted inside a request's span is worked in a span of the same
// trace, a child of the insert span.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "leaseholdotel")
	defer os.RemoveAll(dir)
	d, db, err := sqlite.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		panic(err)
	}

	recorder := tracetest.NewSpanRecorder() // in production: an exporter
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
	tracing := leaseholdotel.New(&leaseholdotel.Options{TracerProvider: tp, Propagator: propagation.TraceContext{}})

	done := make(chan struct{})
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[otelArgs](func(ctx context.Context, job *leasehold.Job[otelArgs]) error {
		close(done)
		return nil
	}))
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: workers, PollInterval: 50 * time.Millisecond,
		Middleware: []leasehold.Middleware{tracing},
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	if err := client.Start(ctx); err != nil {
		panic(err)
	}

	reqCtx, request := tp.Tracer("app").Start(ctx, "POST /payments")
	if _, err := client.Insert(reqCtx, otelArgs{Mode: "ok"}, nil); err != nil {
		panic(err)
	}
	request.End()
	<-done
	if err := client.Stop(ctx); err != nil {
		panic(err)
	}

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range recorder.Ended() {
		spans[s.Name()] = s
	}
	insert, work := spans["leasehold.insert"], spans["leasehold.work otel"]
	fmt.Println("same trace:", work.SpanContext().TraceID() == request.SpanContext().TraceID())
	fmt.Println("work is a child of insert:", work.Parent().SpanID() == insert.SpanContext().SpanID())
	// Output:
	// same trace: true
	// work is a child of insert: true
}
