/*
Package leaseholdprom exports a leasehold client's metrics to Prometheus
(github.com/prometheus/client_golang).

A Collector is both a prometheus.Collector and a leasehold middleware. As
middleware it times every handler call and every lease renewal; as a
collector it reads, at each scrape, the client's counters (Client.Stats) and
the job counts and queue backlog from the database. It must exist before the
client, because it goes in Config.Middleware, and is bound to the client
afterwards:

	metrics := leaseholdprom.New(nil)
	client, err := leasehold.NewClient(driver, &leasehold.Config{
		Workers:    workers,
		Middleware: []leasehold.Middleware{metrics},
	})
	if err != nil {
		return err
	}
	metrics.Bind(client)

	// Either register it with your own registry...
	prometheus.MustRegister(metrics)
	// ...or serve a registry that holds only it.
	mux.Handle("/metrics", metrics.Handler())
	mux.Handle("/healthz", leaseholdprom.Healthz(client, 2*time.Second))

To export two clients from one process, give each its own Collector and
register them with distinguishing labels:
prometheus.WrapRegistererWith(prometheus.Labels{"client": "billing"}, reg).

# Metrics

Read from the database at scrape (within Options.ScrapeTimeout):

	leasehold_jobs{queue,state}              gauge: jobs by queue and state
	leasehold_queue_backlog_jobs{queue}      gauge: jobs claimable now
	leasehold_queue_lag_seconds{queue}       gauge: age of the oldest claimable job
	leasehold_clients_alive                  gauge: working clients in the client registry
	leasehold_queue_keys_waiting{queue}      gauge: distinct flow-control keys with waiting jobs
	leasehold_queue_key_max_waiting_jobs{queue}  gauge: most waiting jobs of one key
	leasehold_queue_key_waiting_jobs{queue}  histogram: waiting jobs per key (buckets 1 to 10000)
	leasehold_database_up                    gauge: 1 if this scrape's queries succeeded
	leasehold_scrape_errors_total{query}     counter: failed scrape queries

A failed or slow query does not fail the scrape: its metrics are left out,
leasehold_database_up is 0 and leasehold_scrape_errors_total counts it.
The key metrics are per queue whatever the number of keys (never one
series per key); the keys themselves are in Client.KeyStats, `leasehold
keys` and the dashboard's Keys page.

Counters of the bound client, from Client.Stats:

	leasehold_jobs_claimed_total
	leasehold_jobs_completed_total
	leasehold_jobs_failed_total              handler errors and panics
	leasehold_jobs_discarded_total
	leasehold_jobs_cancelled_total
	leasehold_jobs_snoozed_total
	leasehold_leases_released_total
	leasehold_leases_lost_total
	leasehold_fenced_writes_rejected_total
	leasehold_leases_expired_total           expired leases reclaimed by the expirer
	leasehold_heartbeat_statements_total
	leasehold_notifications_silent_total     times LISTEN was found silent (a pooler?)
	leasehold_events_dropped_total           Subscribe events dropped on a full channel
	leasehold_handler_seconds_total

Observed by the middleware:

	leasehold_job_duration_seconds{queue,kind,result}  histogram; result is ok, error or panic
	leasehold_job_claim_lag_seconds{queue,kind}        histogram: leased_at - scheduled_at
	leasehold_heartbeat_duration_seconds               histogram: renewal round trip
	leasehold_heartbeat_errors_total                   counter: failed renewals

Labels take only queue and kind names, which the application bounds, and
fixed sets of states and results; never job IDs.
*/
package leaseholdprom
