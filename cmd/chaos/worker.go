package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/internal/dburl"
)

// workerConfig is a worker process's settings, passed by the harness.
type workerConfig struct {
	dbURL, pspURL, id string
	ttl, pspTimeout   time.Duration
	pendingAfter      time.Duration
	concurrency       int
	reportEvery       time.Duration
}

func (w workerConfig) args() []string {
	return []string{"worker", "--db", w.dbURL, "--psp", w.pspURL, "--id", w.id, "--ttl", w.ttl.String(),
		"--psp-timeout", w.pspTimeout.String(), "--pending-after", w.pendingAfter.String(),
		"--concurrency", fmt.Sprint(w.concurrency), "--report-every", w.reportEvery.String()}
}

// report is one line a worker writes on stdout: its counters so far.
type report struct {
	ID        string                  `json:"id"`
	PID       int                     `json:"pid"`
	Owner     string                  `json:"owner"`
	Final     bool                    `json:"final,omitempty"`
	Stats     leasehold.Stats         `json:"stats"`
	Charge    payments.ChargeStats    `json:"charge"`
	Reconcile payments.ReconcileStats `json:"reconcile"`
}

// runWorker is a worker process: one leasehold client working charges and
// reconciliations until SIGTERM, reporting its counters on stdout.
func runWorker(args []string) error {
	fs := flag.NewFlagSet("chaos worker", flag.ContinueOnError)
	var w workerConfig
	fs.StringVar(&w.dbURL, "db", "", "database URL")
	fs.StringVar(&w.pspURL, "psp", "", "PSP simulator URL")
	fs.StringVar(&w.id, "id", "", "client ID")
	fs.DurationVar(&w.ttl, "ttl", 2*time.Second, "charge lease TTL")
	fs.DurationVar(&w.pspTimeout, "psp-timeout", 500*time.Millisecond, "PSP HTTP timeout")
	fs.DurationVar(&w.pendingAfter, "pending-after", 5*time.Second, "reconciler's pending threshold")
	fs.IntVar(&w.concurrency, "concurrency", 8, "charges at once")
	fs.DurationVar(&w.reportEvery, "report-every", 200*time.Millisecond, "how often to report counters")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if w.dbURL == "" || w.pspURL == "" || w.id == "" {
		return errors.New("--db, --psp and --id are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The database may be restarting when a worker starts: keep trying.
	var db *dburl.DB
	for {
		var err error
		db, err = dburl.Open(ctx, w.dbURL)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		logger.Warn("open database; retrying", "error", err)
		time.Sleep(500 * time.Millisecond)
	}
	defer db.Close()
	if db.SQLite != nil {
		return work(ctx, w, db.SQLite, payments.NewSQLiteStore(db.SQLiteDB), logger)
	}
	return work(ctx, w, db.Postgres, payments.NewPostgresStore(db.Postgres.Pool()), logger)
}

func work[TTx any](ctx context.Context, w workerConfig, d driver.Driver[TTx], store *payments.Store[TTx], logger *slog.Logger) error {
	pspClient := psp.NewClient(w.pspURL, w.pspTimeout)
	charge := &payments.ChargeWorker[TTx]{
		Store: store, PSP: pspClient, LeaseTTL: w.ttl, MaxAttempts: 25,
		Retry: leasehold.ExponentialBackoff{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5},
	}
	recon := &payments.Reconciler[TTx]{Store: store, PSP: pspClient, PendingAfter: w.pendingAfter, Logger: logger}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, charge, recon); err != nil {
		return err
	}
	client, err := leasehold.NewClient(d, &leasehold.Config{
		ID: w.id, Workers: ws, LeaseTTL: w.ttl, Logger: logger,
		PollInterval: 100 * time.Millisecond, WatcherInterval: 250 * time.Millisecond,
		Queues: map[string]leasehold.QueueConfig{
			payments.ChargeQueue: {MaxWorkers: w.concurrency}, payments.ReconcileQueue: {MaxWorkers: 1},
		},
	})
	if err != nil {
		return err
	}
	for {
		startCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = client.Start(startCtx)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
		logger.Warn("start client; retrying", "error", err)
		time.Sleep(500 * time.Millisecond)
	}

	enc := json.NewEncoder(os.Stdout)
	emit := func(final bool) {
		_ = enc.Encode(report{ID: w.id, PID: os.Getpid(), Owner: client.Owner(), Final: final,
			Stats: client.Stats(), Charge: charge.Stats(), Reconcile: recon.Stats()})
	}
	t := time.NewTicker(w.reportEvery)
	defer t.Stop()
	for ctx.Err() == nil {
		emit(false)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		logger.Warn("stop client", "error", err)
	}
	emit(true)
	return nil
}
