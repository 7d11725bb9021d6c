package leaseholdotel_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/sqlitetest"
	"github.com/leasehold/leasehold/leaseholdotel"
	"github.com/leasehold/leasehold/leasetype"
)

type otelArgs struct {
	Mode string `json:"mode"` // ok, fail, panic
}

func (otelArgs) Kind() string { return "otel" }

type otherArgs struct{}

func (otherArgs) Kind() string { return "other" }

func (otherArgs) InsertOpts() leasehold.InsertOpts { return leasehold.InsertOpts{Queue: "side"} }

// harness is a started client on a fresh SQLite database with the tracing
// middleware, recording spans.
type harness struct {
	client   *leasehold.Client[*sql.Tx]
	recorder *tracetest.SpanRecorder
	tp       *sdktrace.TracerProvider

	mu sync.Mutex
	// handlerSpans maps a job ID to the span in its handler's context.
	handlerSpans map[int64]trace.SpanContext
	done         chan int64
}

func newHarness(t *testing.T, opts leaseholdotel.Options) *harness {
	t.Helper()
	d, _ := sqlitetest.Open(t)
	h := &harness{
		recorder:     tracetest.NewSpanRecorder(),
		handlerSpans: map[int64]trace.SpanContext{},
		done:         make(chan int64, 16),
	}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.recorder))
	opts.TracerProvider = h.tp
	if opts.Propagator == nil {
		opts.Propagator = propagation.TraceContext{}
	}
	w := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(w, leasehold.WorkFunc[otelArgs](func(ctx context.Context, j *leasehold.Job[otelArgs]) error {
		h.mu.Lock()
		h.handlerSpans[j.ID] = trace.SpanContextFromContext(ctx)
		h.mu.Unlock()
		defer func() { h.done <- j.ID }()
		switch j.Args.Mode {
		case "fail":
			return errors.New("card declined")
		case "panic":
			panic("handler blew up")
		}
		return nil
	}), &leasehold.WorkerOpts{MaxAttempts: 1})
	leasehold.AddWorker(w, leasehold.WorkFunc[otherArgs](func(ctx context.Context, j *leasehold.Job[otherArgs]) error {
		h.done <- j.ID
		return nil
	}))
	c, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: w, PollInterval: 20 * time.Millisecond,
		Queues:     map[string]leasehold.QueueConfig{"default": {MaxWorkers: 4}, "side": {MaxWorkers: 4}},
		Middleware: []leasehold.Middleware{leaseholdotel.New(&opts)}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.client = c
	return h
}

// waitJobs waits until n handlers have returned, then stops the client so
// that every span has ended.
func (h *harness) waitJobs(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.done:
		case <-time.After(15 * time.Second):
			t.Fatal("timed out waiting for jobs")
		}
	}
	if err := h.client.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// spans returns the ended spans with the given name.
func (h *harness) spans(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.recorder.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// workSpan returns the ended work span of a job.
func (h *harness) workSpan(t *testing.T, kind string, id int64) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range h.spans("leasehold.work " + kind) {
		if v, ok := attr(s, leaseholdotel.AttrJobID); ok && v.AsInt64() == id {
			return s
		}
	}
	t.Fatalf("no work span for job %d; spans: %v", id, names(h.recorder.Ended()))
	return nil
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

// TestTraceFromInsertToWork: a job inserted inside a request span is worked
// in a span of the same trace whose parent is the insert span; the handler's
// context carries the work span; the spans carry the job's attributes.
func TestTraceFromInsertToWork(t *testing.T) {
	t.Parallel()
	h := newHarness(t, leaseholdotel.Options{})
	ctx, request := h.tp.Tracer("test").Start(t.Context(), "request")
	res, err := h.client.Insert(ctx, otelArgs{Mode: "ok"}, &leasehold.InsertOpts{Metadata: map[string]any{"tenant": "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	request.End()
	h.waitJobs(t, 1)

	inserts := h.spans("leasehold.insert")
	if len(inserts) != 1 {
		t.Fatalf("insert spans = %d, want 1", len(inserts))
	}
	insert := inserts[0]
	rsc := request.SpanContext()
	if insert.Parent().SpanID() != rsc.SpanID() || insert.SpanContext().TraceID() != rsc.TraceID() {
		t.Errorf("insert span's parent = %v, want the request span %v", insert.Parent(), rsc)
	}
	if insert.SpanKind() != trace.SpanKindProducer {
		t.Errorf("insert span kind = %v", insert.SpanKind())
	}
	for k, want := range map[attribute.Key]attribute.Value{
		leaseholdotel.AttrJobKind:  attribute.StringValue("otel"),
		leaseholdotel.AttrQueue:    attribute.StringValue("default"),
		leaseholdotel.AttrJobCount: attribute.IntValue(1),
	} {
		if got, _ := attr(insert, k); got != want {
			t.Errorf("insert span %s = %v, want %v", k, got.String(), want.String())
		}
	}

	work := h.workSpan(t, "otel", res.Job.ID)
	if work.SpanContext().TraceID() != rsc.TraceID() {
		t.Errorf("work span trace = %s, want the request's %s", work.SpanContext().TraceID(), rsc.TraceID())
	}
	if work.Parent().SpanID() != insert.SpanContext().SpanID() || !work.Parent().IsRemote() {
		t.Errorf("work span's parent = %v, want the insert span %v (remote)", work.Parent(), insert.SpanContext())
	}
	if work.SpanKind() != trace.SpanKindConsumer || work.Status().Code != codes.Unset {
		t.Errorf("work span kind %v, status %v", work.SpanKind(), work.Status())
	}
	row, err := h.client.JobGet(context.Background(), res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[attribute.Key]attribute.Value{
		leaseholdotel.AttrJobID:      attribute.Int64Value(row.ID),
		leaseholdotel.AttrJobKind:    attribute.StringValue("otel"),
		leaseholdotel.AttrQueue:      attribute.StringValue("default"),
		leaseholdotel.AttrJobAttempt: attribute.IntValue(1),
		leaseholdotel.AttrLeaseToken: attribute.Int64Value(row.LeaseToken),
		leaseholdotel.AttrLeaseOwner: attribute.StringValue(h.client.Owner()),
	} {
		if got, _ := attr(work, k); got != want {
			t.Errorf("work span %s = %v, want %v", k, got.String(), want.String())
		}
	}
	h.mu.Lock()
	inHandler := h.handlerSpans[res.Job.ID]
	h.mu.Unlock()
	if inHandler.SpanID() != work.SpanContext().SpanID() {
		t.Errorf("handler's context span = %s, want the work span %s", inHandler.SpanID(), work.SpanContext().SpanID())
	}

	var meta map[string]any
	if err := json.Unmarshal(row.Metadata, &meta); err != nil {
		t.Fatal(err)
	}
	if meta["tenant"] != "acme" {
		t.Errorf("caller's metadata lost: %v", meta)
	}
	wantParent := "00-" + rsc.TraceID().String() + "-" + insert.SpanContext().SpanID().String() + "-01"
	if meta["traceparent"] != wantParent {
		t.Errorf("metadata traceparent = %v, want %s", meta["traceparent"], wantParent)
	}
}

// TestWorkErrors: a failing handler's span has an error status and an
// exception event; a panicking handler's too, and the panic still reaches
// the client, which records the attempt as panicked.
func TestWorkErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, leaseholdotel.Options{})
	ctx := t.Context()
	failed, err := h.client.Insert(ctx, otelArgs{Mode: "fail"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	panicked, err := h.client.Insert(ctx, otelArgs{Mode: "panic"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.waitJobs(t, 2)

	for _, tc := range []struct {
		id          int64
		wantStatus  string
		wantOutcome leasetype.AttemptOutcome
	}{
		{failed.Job.ID, "card declined", leasetype.OutcomeFailed},
		{panicked.Job.ID, "panic: handler blew up", leasetype.OutcomePanicked},
	} {
		s := h.workSpan(t, "otel", tc.id)
		if s.Status().Code != codes.Error || s.Status().Description != tc.wantStatus {
			t.Errorf("job %d: status = %+v, want error %q", tc.id, s.Status(), tc.wantStatus)
		}
		if evs := s.Events(); len(evs) != 1 || evs[0].Name != "exception" {
			t.Errorf("job %d: events = %+v, want one exception", tc.id, evs)
		}
		attempts, err := h.client.JobAttempts(context.Background(), tc.id)
		if err != nil {
			t.Fatal(err)
		}
		if len(attempts) != 1 || attempts[0].Outcome != tc.wantOutcome {
			t.Errorf("job %d: attempts = %+v, want one %s", tc.id, attempts, tc.wantOutcome)
		}
	}
}

// TestLinkToInsertAndBatch: with LinkToInsert, each work span roots a new
// trace linked to the insert span; a batch of two kinds and queues gets one
// insert span describing both, and every job carries its context.
func TestLinkToInsertAndBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, leaseholdotel.Options{LinkToInsert: true})
	results, err := h.client.InsertMany(t.Context(), []leasehold.InsertManyParams{
		{Args: otelArgs{Mode: "ok"}},
		{Args: otherArgs{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.waitJobs(t, 2)

	inserts := h.spans("leasehold.insert")
	if len(inserts) != 1 {
		t.Fatalf("insert spans = %d, want 1", len(inserts))
	}
	insert := inserts[0]
	if insert.Parent().IsValid() {
		t.Errorf("insert without a request span has parent %v", insert.Parent())
	}
	for k, want := range map[attribute.Key]attribute.Value{
		leaseholdotel.AttrJobKinds: attribute.StringSliceValue([]string{"otel", "other"}),
		leaseholdotel.AttrQueues:   attribute.StringSliceValue([]string{"default", "side"}),
		leaseholdotel.AttrJobCount: attribute.IntValue(2),
	} {
		if got, _ := attr(insert, k); got.String() != want.String() {
			t.Errorf("insert span %s = %v, want %v", k, got.String(), want.String())
		}
	}
	for i, kind := range []string{"otel", "other"} {
		work := h.workSpan(t, kind, results[i].Job.ID)
		if work.Parent().IsValid() || work.SpanContext().TraceID() == insert.SpanContext().TraceID() {
			t.Errorf("%s: work span parent %v trace %s, want a new root trace", kind, work.Parent(), work.SpanContext().TraceID())
		}
		links := work.Links()
		if len(links) != 1 || !links[0].SpanContext.Equal(insert.SpanContext().WithRemote(true)) {
			t.Errorf("%s: links = %+v, want the insert span %v", kind, links, insert.SpanContext())
		}
	}
}

// TestWorkWithoutTraceContext: a job inserted by a client without the
// middleware is worked in a new root span.
func TestWorkWithoutTraceContext(t *testing.T) {
	t.Parallel()
	h := newHarness(t, leaseholdotel.Options{})
	plain, err := leasehold.NewClient(h.client.Driver(), &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	res, err := plain.Insert(t.Context(), otelArgs{Mode: "ok"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.waitJobs(t, 1)
	if work := h.workSpan(t, "otel", res.Job.ID); work.Parent().IsValid() || len(work.Links()) != 0 {
		t.Errorf("work span parent %v links %v, want a root span", work.Parent(), work.Links())
	}
	if n := len(h.spans("leasehold.insert")); n != 0 {
		t.Errorf("insert spans = %d, want 0 from a client without the middleware", n)
	}
}
