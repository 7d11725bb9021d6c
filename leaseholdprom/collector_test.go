package leaseholdprom_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlitetest"
	"github.com/leasehold/leasehold/leaseholdprom"
	"github.com/leasehold/leasehold/sqlite"
)

type promArgs struct {
	Mode string `json:"mode"` // ok, fail, panic, heartbeat
}

func (promArgs) Kind() string { return "prom" }

// openDB opens a migrated SQLite database in a temporary directory.
func openDB(t *testing.T) (*sqlite.Driver, *sql.DB) {
	t.Helper()
	return sqlitetest.Open(t)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gather collects c through a fresh registry, by metric family name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// find returns the metric of the family with exactly the given labels, or nil.
func find(mf *dto.MetricFamily, labels map[string]string) *dto.Metric {
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, lp := range m.GetLabel() {
			if labels[lp.GetName()] != lp.GetValue() {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// histogramCount sums the sample counts of a histogram family over the
// series whose labels include the given ones.
func histogramCount(mf *dto.MetricFamily, labels map[string]string) uint64 {
	var n uint64
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		match := true
		for k, v := range labels {
			if have[k] != v {
				match = false
			}
		}
		if match {
			n += m.GetHistogram().GetSampleCount()
		}
	}
	return n
}

// TestCollector works jobs that complete, fail, panic and outlive a heartbeat
// interval, then checks the counters, gauges and histograms a scrape shows.
func TestCollector(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, _ := openDB(t)

	metrics := leaseholdprom.New(&leaseholdprom.Options{ScrapeTimeout: 5 * time.Second})
	var client atomic.Pointer[leasehold.Client[*sql.Tx]]
	w := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(w, leasehold.WorkFunc[promArgs](func(ctx context.Context, j *leasehold.Job[promArgs]) error {
		switch j.Args.Mode {
		case "fail":
			return errors.New("card declined")
		case "panic":
			panic("handler blew up")
		case "heartbeat":
			// Outlive at least one lease renewal, without a fixed sleep.
			for client.Load().Stats().HeartbeatStatements == 0 {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		return nil
	}), &leasehold.WorkerOpts{MaxAttempts: 1})

	c, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: w, LeaseTTL: 10 * time.Second, PollInterval: 20 * time.Millisecond,
		Middleware: []leasehold.Middleware{metrics}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	client.Store(c)
	metrics.Bind(c)

	// Waiting jobs, never worked: one due in a queue no client works (queue
	// lag), one scheduled an hour ahead.
	if _, err := c.Insert(ctx, promArgs{Mode: "ok"}, &leasehold.InsertOpts{Queue: "idle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Insert(ctx, promArgs{Mode: "ok"}, &leasehold.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"ok", "ok", "fail", "panic", "heartbeat"} {
		opts := &leasehold.InsertOpts{}
		if mode == "heartbeat" {
			// Renewed every 0.5 s; the others never need renewing.
			opts.LeaseTTL = 1500 * time.Millisecond
		}
		if _, err := c.Insert(ctx, promArgs{Mode: mode}, opts); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "3 completed and 2 discarded jobs", func() bool {
		s := c.Stats()
		return s.Completed == 3 && s.Discarded == 2
	})
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	stats := c.Stats()

	// The exposition text of /metrics, as Prometheus would scrape it.
	srv := httptest.NewServer(metrics.Handler())
	t.Cleanup(srv.Close)
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	text := string(body)
	for _, line := range []string{
		"leasehold_jobs_claimed_total 5",
		"leasehold_jobs_completed_total 3",
		"leasehold_jobs_failed_total 2",
		"leasehold_jobs_discarded_total 2",
		"leasehold_leases_lost_total 0",
		"leasehold_fenced_writes_rejected_total 0",
		"leasehold_leases_expired_total 0",
		`leasehold_jobs{queue="default",state="completed"} 3`,
		`leasehold_jobs{queue="default",state="discarded"} 2`,
		`leasehold_jobs{queue="default",state="scheduled"} 1`,
		`leasehold_jobs{queue="default",state="running"} 0`,
		`leasehold_jobs{queue="idle",state="available"} 1`,
		`leasehold_queue_backlog_jobs{queue="idle"} 1`,
		`leasehold_queue_backlog_jobs{queue="default"} 0`,
		`leasehold_queue_lag_seconds{queue="default"} 0`,
		"leasehold_database_up 1",
		"leasehold_clients_alive 0", // the client stopped: it deregistered
		`leasehold_job_duration_seconds_count{kind="prom",queue="default",result="ok"} 3`,
		`leasehold_job_duration_seconds_count{kind="prom",queue="default",result="error"} 1`,
		`leasehold_job_duration_seconds_count{kind="prom",queue="default",result="panic"} 1`,
		`leasehold_job_claim_lag_seconds_count{kind="prom",queue="default"} 5`,
		"# HELP leasehold_jobs Jobs in the database by queue and state, read at scrape.",
		"# TYPE leasehold_job_duration_seconds histogram",
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(text, "leasehold_scrape_errors_total{") {
		t.Errorf("scrape errors counted on a healthy database:\n%s", text)
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", text)
	}

	mfs := gather(t, metrics)
	lag := find(mfs["leasehold_queue_lag_seconds"], map[string]string{"queue": "idle"})
	if lag == nil || lag.GetGauge().GetValue() <= 0 {
		t.Errorf("queue lag of idle = %v, want > 0", lag)
	}
	if stats.HeartbeatStatements == 0 {
		t.Fatal("no heartbeat statement during the long job")
	}
	hb := mfs["leasehold_heartbeat_duration_seconds"].GetMetric()[0].GetHistogram()
	if got := int64(hb.GetSampleCount()); got != stats.HeartbeatStatements {
		t.Errorf("heartbeat round trips observed = %d, want %d (every statement)", got, stats.HeartbeatStatements)
	}
	if hb.GetSampleSum() <= 0 {
		t.Errorf("heartbeat round-trip sum = %v, want > 0", hb.GetSampleSum())
	}
	if ed := find(mfs["leasehold_events_dropped_total"], nil); ed == nil || ed.GetCounter().GetValue() != float64(stats.EventsDropped) {
		t.Errorf("leasehold_events_dropped_total = %v, want %d", ed, stats.EventsDropped)
	}
	if hs := find(mfs["leasehold_heartbeat_statements_total"], nil); hs.GetCounter().GetValue() != float64(stats.HeartbeatStatements) {
		t.Errorf("leasehold_heartbeat_statements_total = %v, want %d", hs.GetCounter().GetValue(), stats.HeartbeatStatements)
	}
	if n := histogramCount(mfs["leasehold_job_duration_seconds"], nil); n != 5 {
		t.Errorf("job durations observed = %d, want 5", n)
	}

	problems, err := testutil.CollectAndLint(metrics)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestCollectorDatabaseClosed: a scrape while the database is closed
// succeeds, counts an error per failed query and reports the database down.
func TestCollectorDatabaseClosed(t *testing.T) {
	t.Parallel()
	d, db := openDB(t)
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	metrics := leaseholdprom.New(nil)
	metrics.Bind(c)
	if _, err := c.Insert(t.Context(), promArgs{Mode: "ok"}, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for scrape := 1; scrape <= 2; scrape++ {
		want := strings.NewReader(strings.ReplaceAll(`
# HELP leasehold_database_up 1 if every database query of this scrape succeeded, else 0.
# TYPE leasehold_database_up gauge
leasehold_database_up 0
# HELP leasehold_scrape_errors_total Database queries made at scrape time that failed or timed out, by query (job_counts, queue_backlog, clients, key_stats).
# TYPE leasehold_scrape_errors_total counter
leasehold_scrape_errors_total{query="clients"} N
leasehold_scrape_errors_total{query="job_counts"} N
leasehold_scrape_errors_total{query="key_stats"} N
leasehold_scrape_errors_total{query="queue_backlog"} N
`, "N", strconv.Itoa(scrape)))
		if err := testutil.CollectAndCompare(metrics, want, "leasehold_database_up", "leasehold_scrape_errors_total", "leasehold_jobs"); err != nil {
			t.Errorf("scrape %d: %v", scrape, err)
		}
	}
	// The client's own counters are still exported.
	if err := testutil.CollectAndCompare(metrics, strings.NewReader(`
# HELP leasehold_jobs_claimed_total Leases granted to this client.
# TYPE leasehold_jobs_claimed_total counter
leasehold_jobs_claimed_total 0
`), "leasehold_jobs_claimed_total"); err != nil {
		t.Error(err)
	}
}

// TestCollectorUnbound: before Bind, a scrape shows only what the
// middleware observed, and touches no database.
func TestCollectorUnbound(t *testing.T) {
	t.Parallel()
	metrics := leaseholdprom.New(nil)
	mfs := gather(t, metrics)
	for _, name := range []string{"leasehold_jobs", "leasehold_jobs_claimed_total", "leasehold_database_up"} {
		if mfs[name] != nil {
			t.Errorf("unbound collector exports %s", name)
		}
	}
	if mfs["leasehold_heartbeat_errors_total"] == nil {
		t.Error("unbound collector lacks leasehold_heartbeat_errors_total")
	}
	metrics.ObserveHeartbeat(3, 0, errors.New("connection reset"))
	if got := testutil.ToFloat64(collectorOnly{metrics, "leasehold_heartbeat_errors_total"}); got != 1 {
		t.Errorf("leasehold_heartbeat_errors_total = %v, want 1", got)
	}
}

// TestWorkRepanics: the middleware records a panicking handler with result
// "panic" and lets the panic continue to the client.
func TestWorkRepanics(t *testing.T) {
	t.Parallel()
	metrics := leaseholdprom.New(nil)
	now := time.Now()
	job := newRow(now)
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the handler's panic", r)
			}
		}()
		_ = metrics.Work(t.Context(), job, func(context.Context) error { panic("boom") })
	}()
	mfs := gather(t, metrics)
	if n := histogramCount(mfs["leasehold_job_duration_seconds"], map[string]string{"result": "panic", "kind": "prom", "queue": "q"}); n != 1 {
		t.Errorf("panic durations = %d, want 1", n)
	}
	lag := histogramCount(mfs["leasehold_job_claim_lag_seconds"], map[string]string{"kind": "prom", "queue": "q"})
	if lag != 1 {
		t.Errorf("claim lags = %d, want 1", lag)
	}
	if s := mfs["leasehold_job_claim_lag_seconds"].GetMetric()[0].GetHistogram().GetSampleSum(); s < 1.9 || s > 2.1 {
		t.Errorf("claim lag = %vs, want 2s", s)
	}
}

// collectorOnly exposes one metric family of a collector, for testutil.ToFloat64.
type collectorOnly struct {
	c    prometheus.Collector
	name string
}

func (o collectorOnly) Describe(ch chan<- *prometheus.Desc) { o.c.Describe(ch) }

func (o collectorOnly) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric)
	go func() {
		o.c.Collect(all)
		close(all)
	}()
	for m := range all {
		if strings.Contains(m.Desc().String(), `"`+o.name+`"`) {
			ch <- m
		}
	}
}

// TestCollectorClientsAlive: leasehold_clients_alive counts the registry's
// alive clients at each scrape: a started client, not one that stopped
// beating, none after Stop.
func TestCollectorClientsAlive(t *testing.T) {
	t.Parallel()
	d, _ := openDB(t)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[promArgs](func(context.Context, *leasehold.Job[promArgs]) error { return nil }))
	metrics := leaseholdprom.New(nil)
	c, err := leasehold.NewClient(d, &leasehold.Config{Workers: w, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	metrics.Bind(c)
	alive := func() float64 {
		t.Helper()
		m := find(gather(t, metrics)["leasehold_clients_alive"], nil)
		if m == nil {
			t.Fatal("no leasehold_clients_alive in the scrape")
		}
		return m.GetGauge().GetValue()
	}
	if got := alive(); got != 0 {
		t.Fatalf("before Start: %v alive, want 0 (an idle client does not register)", got)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.GetExecutor().ClientRegister(t.Context(), &driver.ClientRegisterParams{Owner: "gone:1:x", TTL: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	// The client registers in the background right after Start.
	waitFor(t, "the started client counted alive, the gone row not", func() bool { return alive() == 1 })
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := alive(); got != 0 {
		t.Fatalf("after Stop: %v alive, want 0", got)
	}
}
