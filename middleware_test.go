package leasehold_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

type traceArgs struct {
	Sleep time.Duration `json:"sleep"`
}

func (traceArgs) Kind() string { return "trace" }

// recordingMiddleware implements every middleware capability and records
// what it saw.
type recordingMiddleware struct {
	leasehold.MiddlewareDefaults
	name string
	mu   sync.Mutex
	log  *[]string
	// heartbeats counts observed renewals.
	heartbeats int
	seenMeta   map[string]any
}

func (m *recordingMiddleware) InsertMany(ctx context.Context, jobs []*leasehold.InsertJob, next func(context.Context) error) error {
	m.record("insert " + m.name)
	for _, j := range jobs {
		if j.Opts.Metadata == nil {
			j.Opts.Metadata = map[string]any{}
		}
		j.Opts.Metadata["trace_"+m.name] = "t-" + m.name
	}
	return next(ctx)
}

func (m *recordingMiddleware) Work(ctx context.Context, job *leasetype.JobRow, next func(context.Context) error) error {
	m.record("work in " + m.name)
	var meta map[string]any
	if err := json.Unmarshal(job.Metadata, &meta); err != nil {
		return err
	}
	m.mu.Lock()
	m.seenMeta = meta
	m.mu.Unlock()
	err := next(ctx)
	m.record("work out " + m.name)
	return err
}

func (m *recordingMiddleware) ObserveHeartbeat(leases int, rtt time.Duration, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil && leases > 0 && rtt > 0 {
		m.heartbeats++
	}
}

func (m *recordingMiddleware) record(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	*m.log = append(*m.log, s)
}

// TestMiddleware: insert middleware adds metadata that the work middleware
// sees on the claimed job; work middleware wraps the handler outermost
// first; heartbeat observers see renewals; the caller's metadata map is not
// changed.
func TestMiddleware(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "mw.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrate.New(d).Up(ctx); err != nil {
		t.Fatal(err)
	}
	var (
		logMu sync.Mutex
		log   []string
	)
	outer := &recordingMiddleware{name: "outer", log: &log}
	inner := &recordingMiddleware{name: "inner", log: &log}
	done := make(chan struct{})
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[traceArgs](func(ctx context.Context, j *leasehold.Job[traceArgs]) error {
		outer.record("handler")
		time.Sleep(j.Args.Sleep)
		close(done)
		return nil
	}))
	c, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: w, LeaseTTL: 300 * time.Millisecond, PollInterval: 50 * time.Millisecond,
		Middleware: []leasehold.Middleware{outer, inner}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	callerMeta := map[string]any{"request": "r-1"}
	if _, err := c.Insert(ctx, traceArgs{Sleep: 400 * time.Millisecond}, &leasehold.InsertOpts{Metadata: callerMeta}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("job did not run")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	logMu.Lock()
	defer logMu.Unlock()
	want := []string{"insert outer", "insert inner", "work in outer", "work in inner", "handler", "work out inner", "work out outer"}
	if len(log) != len(want) {
		t.Fatalf("log = %q, want %q", log, want)
	}
	for i := range want {
		if log[i] != want[i] {
			t.Fatalf("log = %q, want %q", log, want)
		}
	}
	if inner.seenMeta["request"] != "r-1" || inner.seenMeta["trace_outer"] != "t-outer" || inner.seenMeta["trace_inner"] != "t-inner" {
		t.Fatalf("metadata seen by the worker = %v", inner.seenMeta)
	}
	if len(callerMeta) != 1 {
		t.Fatalf("the caller's metadata map was changed: %v", callerMeta)
	}
	if outer.heartbeats == 0 {
		t.Fatalf("no heartbeat observed during a job longer than the TTL")
	}
	if _, err := leasehold.NewClient(d, &leasehold.Config{Middleware: []leasehold.Middleware{leasehold.MiddlewareDefaults{}}}); !errors.Is(err, leasehold.ErrInvalidConfig) {
		t.Fatalf("NewClient with a middleware of no known kind = %v, want ErrInvalidConfig", err)
	}
}
