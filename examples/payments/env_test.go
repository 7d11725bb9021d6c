package payments_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/internal/testdb"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// env is one test's database, payments store and PSP.
type env[TTx any] struct {
	t     *testing.T
	d     driver.Driver[TTx]
	store *payments.Store[TTx]
	psp   *psp.Server
	pspC  *psp.Client
	// merchantLimit is the charge queue's KeyRateLimit; nil for none.
	merchantLimit *leasehold.RateLimit
}

// both runs a test on SQLite and on Postgres, each with a fresh database
// and its own PSP.
func both(t *testing.T, pspCfg psp.Config, sq func(*testing.T, *env[*sql.Tx]), pg func(*testing.T, *env[pgx.Tx])) {
	t.Helper()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		d, db := testdb.SQLite(t)
		sq(t, newEnv(t, d, payments.NewSQLiteStore(db), pspCfg))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		d := testdb.Postgres(t)
		pg(t, newEnv(t, d, payments.NewPostgresStore(d.Pool()), pspCfg))
	})
}

func newEnv[TTx any](t *testing.T, d driver.Driver[TTx], store *payments.Store[TTx], pspCfg psp.Config) *env[TTx] {
	t.Helper()
	ctx := context.Background()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := store.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := store.Setup(ctx); err != nil {
		t.Fatalf("Setup is not idempotent: %v", err)
	}
	s, err := psp.Start(pspCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &env[TTx]{t: t, d: d, store: store, psp: s, pspC: psp.NewClient(s.URL(), 2*time.Second)}
}

// client returns a client on d (wrapped or not), started when it has
// workers, stopped at cleanup.
func (e *env[TTx]) client(d driver.Driver[TTx], ws *leasehold.Workers, ttl time.Duration) *leasehold.Client[TTx] {
	e.t.Helper()
	if d == nil {
		d = e.d
	}
	c, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: ws, LeaseTTL: ttl, PollInterval: 50 * time.Millisecond, WatcherInterval: 100 * time.Millisecond,
		Queues: map[string]leasehold.QueueConfig{payments.ChargeQueue: payments.ChargeQueueConfig(100, e.merchantLimit), payments.PayoutQueue: {MaxWorkers: 2}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if ws != nil {
		if err := c.Start(context.Background()); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = c.StopAndCancel(ctx)
		})
	}
	return c
}

func (e *env[TTx]) create(c *leasehold.Client[TTx], id string) *payments.Payment {
	e.t.Helper()
	p, err := e.store.Create(context.Background(), c, payments.NewPayment{ID: id, AmountCents: 1999, Currency: "EUR"})
	if err != nil {
		e.t.Fatalf("create %s: %v", id, err)
	}
	return p
}

func (e *env[TTx]) payment(id string) *payments.Payment {
	e.t.Helper()
	p, err := e.store.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds, failing after timeout.
// A describe function, when given, tells what was seen instead.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, describe ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			seen := ""
			for _, d := range describe {
				seen += "; " + d()
			}
			t.Fatalf("not within %s: %s%s", timeout, what, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env[TTx]) waitJob(c *leasehold.Client[TTx], id int64, state leasetype.JobState) *leasetype.JobRow {
	e.t.Helper()
	var row *leasetype.JobRow
	waitFor(e.t, 10*time.Second, "job state "+string(state), func() bool {
		r, err := c.JobGet(context.Background(), id)
		if err != nil {
			e.t.Fatal(err)
		}
		row = r
		return r.State == state
	}, func() string {
		return fmt.Sprintf("job %d is %s (stage %q, attempt %d, last error %q)", id, row.State, row.Stage, row.Attempt, row.LastError)
	})
	return row
}

// pausedDriver is a driver whose lease renewals never reach the database
// but are reported done, like a worker process paused between heartbeats:
// its leases expire on the database while it believes it holds them.
type pausedDriver[TTx any] struct{ driver.Driver[TTx] }

func (d pausedDriver[TTx]) GetExecutor() driver.Executor {
	return pausedExecutor{d.Driver.GetExecutor()}
}

func (d pausedDriver[TTx]) UnwrapExecutor(tx TTx) driver.Executor {
	return pausedExecutor{d.Driver.UnwrapExecutor(tx)}
}

type pausedExecutor struct{ driver.Executor }

func (e pausedExecutor) JobHeartbeat(_ context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	ids := make([]int64, len(p.Leases))
	for i, l := range p.Leases {
		ids[i] = l.ID
	}
	return ids, nil
}

// JobCheckpoint, JobStages and JobDependencies keep the wrapped executor's
// stage recording (driver.StageExecutor): a checkpoint reaches the database,
// and renews the lease there, as it would from a paused process that had
// just woken up.
func (e pausedExecutor) JobCheckpoint(ctx context.Context, p *driver.JobCheckpointParams) (bool, error) {
	return e.Executor.(driver.StageExecutor).JobCheckpoint(ctx, p)
}

func (e pausedExecutor) JobStages(ctx context.Context, p *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	return e.Executor.(driver.StageExecutor).JobStages(ctx, p)
}

func (e pausedExecutor) JobDependencies(ctx context.Context, p *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	return e.Executor.(driver.StageExecutor).JobDependencies(ctx, p)
}
