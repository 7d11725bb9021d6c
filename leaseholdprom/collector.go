package leaseholdprom

import (
	"context"
	"math"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Source is what the collector reads at scrape time. A *leasehold.Client of
// any backend satisfies it.
type Source interface {
	// Stats returns the client's counters.
	Stats() leasehold.Stats
	// JobCounts counts jobs per queue and state.
	JobCounts(ctx context.Context) ([]*leasetype.QueueStateCount, error)
	// QueueBacklog returns the claimable backlog of every queue.
	QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error)
	// Clients returns the fleet's working clients from the client registry.
	Clients(ctx context.Context) ([]*leasetype.ClientRow, error)
	// KeyStats reports the flow-control keys of unfinished jobs; the
	// collector reads only its per-queue summary.
	KeyStats(ctx context.Context, params *leasehold.KeyStatsParams) (*driver.KeyStatsResult, error)
}

// Options configure a Collector. The zero value, or nil, gives the defaults.
type Options struct {
	// ScrapeTimeout bounds the database queries of one scrape; default 5 s.
	// A query that fails or times out counts in leasehold_scrape_errors_total
	// and leaves its metrics out of that scrape; the scrape itself succeeds.
	ScrapeTimeout time.Duration
	// JobDurationBuckets are the upper bounds, in seconds, of
	// leasehold_job_duration_seconds; default 5 ms to 10 min.
	JobDurationBuckets []float64
	// ClaimLagBuckets are the upper bounds, in seconds, of
	// leasehold_job_claim_lag_seconds; default 10 ms to 1 h.
	ClaimLagBuckets []float64
	// HeartbeatBuckets are the upper bounds, in seconds, of
	// leasehold_heartbeat_duration_seconds; default 0.5 ms to 10 s.
	HeartbeatBuckets []float64
}

func defaultJobDurationBuckets() []float64 {
	return []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}
}

func defaultClaimLagBuckets() []float64 {
	return []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
}

func defaultHeartbeatBuckets() []float64 {
	return []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
}

// withDefaults returns a copy of o with defaults filled in and the buckets
// made strictly increasing, so that no option can make New panic.
func (o *Options) withDefaults() Options {
	var out Options
	if o != nil {
		out = *o
	}
	if out.ScrapeTimeout <= 0 {
		out.ScrapeTimeout = 5 * time.Second
	}
	out.JobDurationBuckets = cleanBuckets(out.JobDurationBuckets, defaultJobDurationBuckets)
	out.ClaimLagBuckets = cleanBuckets(out.ClaimLagBuckets, defaultClaimLagBuckets)
	out.HeartbeatBuckets = cleanBuckets(out.HeartbeatBuckets, defaultHeartbeatBuckets)
	return out
}

// cleanBuckets returns a sorted copy of b without NaNs or duplicates, or the
// default when nothing is left.
func cleanBuckets(b []float64, def func() []float64) []float64 {
	out := slices.DeleteFunc(slices.Clone(b), math.IsNaN)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 || len(out) == 1 && math.IsInf(out[0], +1) {
		return def()
	}
	return out
}

// Collector exports a leasehold client's metrics to Prometheus. It is a
// prometheus.Collector, to register with a registry, and a leasehold
// middleware (WorkMiddleware and HeartbeatObserver), to put in
// Config.Middleware so that it sees every handler call and lease renewal.
//
// Create it with New before the client, then Bind it to the client: the
// metrics read from the database and from Client.Stats are exported only
// once it is bound. It is safe for concurrent use.
type Collector struct {
	leasehold.MiddlewareDefaults
	opts   Options
	source atomic.Pointer[Source]

	// Observed by the middleware.
	jobDuration     *prometheus.HistogramVec
	claimLag        *prometheus.HistogramVec
	heartbeatRTT    prometheus.Histogram
	heartbeatErrors prometheus.Counter
	// Counted at scrape.
	scrapeErrors *prometheus.CounterVec

	// Read at scrape from the bound client.
	jobs, backlog, lag, up, clientsAlive *prometheus.Desc
	// Per queue, never per key: see collectKeys.
	keysWaiting, keyMaxWaiting, keyWaiting *prometheus.Desc
	stats                                  []statDesc
}

// statDesc is one counter of leasehold.Stats.
type statDesc struct {
	desc  *prometheus.Desc
	value func(leasehold.Stats) float64
}

// Query label values of leasehold_scrape_errors_total.
const (
	queryJobCounts    = "job_counts"
	queryQueueBacklog = "queue_backlog"
	queryClients      = "clients"
	queryKeyStats     = "key_stats"
)

// Result label values of leasehold_job_duration_seconds.
const (
	resultOK    = "ok"
	resultError = "error"
	resultPanic = "panic"
)

var (
	_ prometheus.Collector        = (*Collector)(nil)
	_ leasehold.WorkMiddleware    = (*Collector)(nil)
	_ leasehold.HeartbeatObserver = (*Collector)(nil)
)

// New returns a collector with the given options; opts may be nil. Put it
// in Config.Middleware, create the client, then call Bind.
func New(opts *Options) *Collector {
	o := opts.withDefaults()
	c := &Collector{
		opts: o,
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasehold_job_duration_seconds",
			Help:    "Time spent in job handlers (and the middleware inside this one), by queue, kind and result (ok, error or panic).",
			Buckets: o.JobDurationBuckets,
		}, []string{"queue", "kind", "result"}),
		claimLag: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "leasehold_job_claim_lag_seconds",
			Help:    "Time from a job becoming due (its scheduled_at) to its claim (leased_at), on the database clock, by queue and kind.",
			Buckets: o.ClaimLagBuckets,
		}, []string{"queue", "kind"}),
		heartbeatRTT: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "leasehold_heartbeat_duration_seconds",
			Help:    "Round-trip time of successful batched lease renewal statements.",
			Buckets: o.HeartbeatBuckets,
		}),
		heartbeatErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leasehold_heartbeat_errors_total",
			Help: "Batched lease renewal statements that failed.",
		}),
		scrapeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leasehold_scrape_errors_total",
			Help: "Database queries made at scrape time that failed or timed out, by query (job_counts, queue_backlog, clients, key_stats).",
		}, []string{"query"}),
		jobs: prometheus.NewDesc("leasehold_jobs",
			"Jobs in the database by queue and state, read at scrape.", []string{"queue", "state"}, nil),
		backlog: prometheus.NewDesc("leasehold_queue_backlog_jobs",
			"Jobs that could be claimed now (available, or scheduled or retryable and due), by queue, read at scrape.", []string{"queue"}, nil),
		lag: prometheus.NewDesc("leasehold_queue_lag_seconds",
			"How long the oldest claimable job of the queue has been due, on the database clock; 0 when none is waiting.", []string{"queue"}, nil),
		clientsAlive: prometheus.NewDesc("leasehold_clients_alive",
			"Working clients of the fleet that beat into the client registry within their last three intervals, read at scrape.", nil, nil),
		keysWaiting: prometheus.NewDesc("leasehold_queue_keys_waiting",
			"Distinct flow-control keys (InsertOpts.Key, WorkerOpts.KeyBy) with at least one waiting job (available, scheduled or retryable), by queue, read at scrape.", []string{"queue"}, nil),
		keyMaxWaiting: prometheus.NewDesc("leasehold_queue_key_max_waiting_jobs",
			"The most waiting jobs of one flow-control key of the queue, read at scrape; 0 when no keyed job waits.", []string{"queue"}, nil),
		keyWaiting: prometheus.NewDesc("leasehold_queue_key_waiting_jobs",
			"Distribution of waiting jobs per flow-control key, by queue, read at scrape: each key with waiting jobs is one observation of its count (never one series per key).", []string{"queue"}, nil),
		up: prometheus.NewDesc("leasehold_database_up",
			"1 if every database query of this scrape succeeded, else 0.", nil, nil),
	}
	c.stats = []statDesc{
		counter("leasehold_jobs_claimed_total", "Leases granted to this client.",
			func(s leasehold.Stats) int64 { return s.Claimed }),
		counter("leasehold_jobs_completed_total", "Jobs this client completed, including by CompleteTx.",
			func(s leasehold.Stats) int64 { return s.Completed }),
		counter("leasehold_jobs_failed_total", "Attempts on this client whose handler returned an error or panicked.",
			func(s leasehold.Stats) int64 { return s.Failed }),
		counter("leasehold_jobs_discarded_total", "Jobs this client discarded: permanent error, attempts exhausted or bad arguments.",
			func(s leasehold.Stats) int64 { return s.Discarded }),
		counter("leasehold_jobs_cancelled_total", "Jobs this client ended as cancelled, by their handler or by a cancellation request.",
			func(s leasehold.Stats) int64 { return s.Cancelled }),
		counter("leasehold_cancel_requests_total", "Running jobs whose handler this client interrupted because JobCancel was called on them.",
			func(s leasehold.Stats) int64 { return s.CancelRequests }),
		counter("leasehold_periodic_enqueued_total", "Periodic jobs this client enqueued as the periodic leader.",
			func(s leasehold.Stats) int64 { return s.PeriodicEnqueued }),
		counter("leasehold_pruned_rows_total", "Finished jobs and attempt rows this client deleted as the retention leader.",
			func(s leasehold.Stats) int64 { return s.Pruned }),
		counter("leasehold_jobs_snoozed_total", "Jobs snoozed by their handler on this client.",
			func(s leasehold.Stats) int64 { return s.Snoozed }),
		counter("leasehold_leases_released_total", "Leases this client gave back unworked.",
			func(s leasehold.Stats) int64 { return s.Released }),
		counter("leasehold_leases_lost_total", "Leases this client lost while holding them.",
			func(s leasehold.Stats) int64 { return s.LeasesLost }),
		counter("leasehold_fenced_writes_rejected_total", "Writes of this client refused by the fencing-token check.",
			func(s leasehold.Stats) int64 { return s.FencedWrites }),
		counter("leasehold_ambiguous_commits_total", "Outcomes whose commit this client could not see and found committed when it read the job back.",
			func(s leasehold.Stats) int64 { return s.AmbiguousCommits }),
		counter("leasehold_leases_expired_total", "Expired leases (of any client) reclaimed by this client's expirer.",
			func(s leasehold.Stats) int64 { return s.Expired }),
		counter("leasehold_heartbeat_statements_total", "Batched lease renewal statements this client sent.",
			func(s leasehold.Stats) int64 { return s.HeartbeatStatements }),
		counter("leasehold_notifications_silent_total", "Times this client found insert notifications not arriving while it listened (it polls meanwhile).",
			func(s leasehold.Stats) int64 { return s.NotificationsSilent }),
		counter("leasehold_events_dropped_total", "Subscription events this client dropped because a subscriber's channel was full.",
			func(s leasehold.Stats) int64 { return s.EventsDropped }),
		{
			desc:  prometheus.NewDesc("leasehold_handler_seconds_total", "Total time this client spent in job handlers.", nil, nil),
			value: func(s leasehold.Stats) float64 { return s.HandlerTime.Seconds() },
		},
	}
	return c
}

func counter(name, help string, v func(leasehold.Stats) int64) statDesc {
	return statDesc{
		desc:  prometheus.NewDesc(name, help, nil, nil),
		value: func(s leasehold.Stats) float64 { return float64(v(s)) },
	}
}

// Bind makes the collector read the client's counters and the database at
// scrape. Call it once, after NewClient; binding another client replaces
// the first, and its counters start again from its own values.
func (c *Collector) Bind(client Source) {
	if client == nil {
		c.source.Store(nil)
		return
	}
	c.source.Store(&client)
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.jobDuration.Describe(ch)
	c.claimLag.Describe(ch)
	c.heartbeatRTT.Describe(ch)
	c.heartbeatErrors.Describe(ch)
	c.scrapeErrors.Describe(ch)
	ch <- c.jobs
	ch <- c.backlog
	ch <- c.lag
	ch <- c.up
	ch <- c.clientsAlive
	ch <- c.keysWaiting
	ch <- c.keyMaxWaiting
	ch <- c.keyWaiting
	for _, s := range c.stats {
		ch <- s.desc
	}
}

// Collect implements prometheus.Collector. It reads the bound client's
// counters, and the job counts and backlog from the database within
// Options.ScrapeTimeout; a failed query is counted, not returned.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if p := c.source.Load(); p != nil {
		c.collectSource(ch, *p)
	}
	c.jobDuration.Collect(ch)
	c.claimLag.Collect(ch)
	c.heartbeatRTT.Collect(ch)
	c.heartbeatErrors.Collect(ch)
	c.scrapeErrors.Collect(ch)
}

func (c *Collector) collectSource(ch chan<- prometheus.Metric, src Source) {
	stats := src.Stats()
	for _, s := range c.stats {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.CounterValue, s.value(stats))
	}

	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ScrapeTimeout)
	defer cancel()
	up := 1.0
	// Queues seen in the counts get every state and a lag, zero when
	// missing, so that a series does not vanish when its value drops to 0.
	var queues []string
	counts, err := src.JobCounts(ctx)
	if err != nil {
		up = 0
		c.scrapeErrors.WithLabelValues(queryJobCounts).Inc()
	} else {
		byQueue := map[string]map[leasetype.JobState]int64{}
		for _, qc := range counts {
			if byQueue[qc.Queue] == nil {
				byQueue[qc.Queue] = map[leasetype.JobState]int64{}
				queues = append(queues, qc.Queue)
			}
			byQueue[qc.Queue][qc.State] += qc.Count
		}
		for queue, states := range byQueue {
			for _, state := range leasetype.JobStates() {
				ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(states[state]), queue, string(state))
			}
			for state, n := range states {
				if !state.Valid() {
					// A state this version does not know: export it rather than hide jobs.
					ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), queue, string(state))
				}
			}
		}
	}
	backlog, err := src.QueueBacklog(ctx)
	if err != nil {
		up = 0
		c.scrapeErrors.WithLabelValues(queryQueueBacklog).Inc()
	} else {
		seen := map[string]bool{}
		for _, b := range backlog {
			if seen[b.Queue] {
				continue
			}
			seen[b.Queue] = true
			ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, float64(b.Available), b.Queue)
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, max(b.OldestAge, 0).Seconds(), b.Queue)
		}
		for _, q := range queues {
			if !seen[q] {
				ch <- prometheus.MustNewConstMetric(c.backlog, prometheus.GaugeValue, 0, q)
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, 0, q)
			}
		}
	}
	if clients, err := src.Clients(ctx); err != nil {
		up = 0
		c.scrapeErrors.WithLabelValues(queryClients).Inc()
	} else {
		alive := 0
		for _, cl := range clients {
			if cl.Alive {
				alive++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.clientsAlive, prometheus.GaugeValue, float64(alive))
	}
	if !c.collectKeys(ctx, ch, src, queues) {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

// collectKeys exports the per-queue key summary: the distinct keys with
// waiting jobs, the most waiting jobs of one key, and a histogram of
// waiting jobs per key (buckets driver.KeyWaitingBounds). The series are
// per queue, a fixed number each, whatever the number of keys. Queues seen
// in the job counts without keyed jobs waiting get zero gauges. It reports
// whether the query succeeded.
func (c *Collector) collectKeys(ctx context.Context, ch chan<- prometheus.Metric, src Source, queues []string) bool {
	stats, err := src.KeyStats(ctx, &leasehold.KeyStatsParams{Limit: 1})
	if err != nil {
		c.scrapeErrors.WithLabelValues(queryKeyStats).Inc()
		return false
	}
	seen := map[string]bool{}
	for _, q := range stats.Queues {
		if seen[q.Queue] {
			continue
		}
		seen[q.Queue] = true
		ch <- prometheus.MustNewConstMetric(c.keysWaiting, prometheus.GaugeValue, float64(q.Keys), q.Queue)
		ch <- prometheus.MustNewConstMetric(c.keyMaxWaiting, prometheus.GaugeValue, float64(q.MaxWaiting), q.Queue)
		buckets := make(map[float64]uint64, len(driver.KeyWaitingBounds))
		for i, bound := range driver.KeyWaitingBounds {
			if i < len(q.WaitingBuckets) {
				buckets[float64(bound)] = uint64(max(q.WaitingBuckets[i], 0))
			}
		}
		ch <- prometheus.MustNewConstHistogram(c.keyWaiting, uint64(max(q.Keys, 0)), float64(q.Waiting), buckets, q.Queue)
	}
	for _, q := range queues {
		if !seen[q] {
			ch <- prometheus.MustNewConstMetric(c.keysWaiting, prometheus.GaugeValue, 0, q)
			ch <- prometheus.MustNewConstMetric(c.keyMaxWaiting, prometheus.GaugeValue, 0, q)
		}
	}
	return true
}

// Work implements leasehold.WorkMiddleware: it times the handler and
// records how long the job waited to be claimed. A panic is recorded with
// result "panic" and re-raised for the client to handle.
func (c *Collector) Work(ctx context.Context, job *leasetype.JobRow, next func(ctx context.Context) error) error {
	if job.LeasedAt != nil {
		lag := max(job.LeasedAt.Sub(job.ScheduledAt), 0)
		c.claimLag.WithLabelValues(job.Queue, job.Kind).Observe(lag.Seconds())
	}
	start := time.Now()
	result := resultPanic
	defer func() {
		// Runs on a panic too, which keeps unwinding after it.
		c.jobDuration.WithLabelValues(job.Queue, job.Kind, result).Observe(time.Since(start).Seconds())
	}()
	err := next(ctx)
	result = resultOK
	if err != nil {
		result = resultError
	}
	return err
}

// ObserveHeartbeat implements leasehold.HeartbeatObserver: it records the
// round trip of a successful renewal statement, or counts a failed one.
func (c *Collector) ObserveHeartbeat(leases int, rtt time.Duration, err error) {
	if err != nil {
		c.heartbeatErrors.Inc()
		return
	}
	c.heartbeatRTT.Observe(rtt.Seconds())
}

// Handler returns an http.Handler serving, in the Prometheus exposition
// formats, a registry that holds only this collector: mount it at /metrics.
// To export Go runtime or process metrics too, register the collector with
// your own registry and use promhttp.HandlerFor.
func (c *Collector) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		// Only an inconsistent description can fail on an empty registry,
		// which the tests rule out; answer every scrape with the reason.
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "leaseholdprom: register collector: "+err.Error(), http.StatusInternalServerError)
		})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
