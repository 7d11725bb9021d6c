package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/demo"
	"github.com/leasehold/leasehold/internal/dburl"
)

// demoOptions are the demo's flags.
type demoOptions struct {
	cfg      demo.Config
	noFaults bool
	json     bool
}

func newDemoCmd(g *globalOptions) *cobra.Command {
	o := &demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the payments reference system under injected faults and check nothing is lost or charged twice",
		Long: `demo creates payments, each with its charge job in the same transaction, and
works them with several worker clients in this process against a simulated
payment provider (PSP) on loopback, while it injects faults: workers crash
mid-charge, workers pause past their lease and wake up, the PSP fails, answers
late and loses responses. A reconciliation job settles what the crashes leave.
At the end every payment is checked against the PSP's own ledger.

Without --database-url the demo uses a fresh SQLite file in a temporary
directory, removed afterwards; it ignores LEASEHOLD_DATABASE_URL, which names
your application's database. With --database-url it runs there (Postgres,
MySQL/MariaDB or SQLite), in its own queues (payments.charge,
payments.reconcile, payments.payout) and its own payments, ledger, payouts
and settlement_reports tables, and leaves its payments and jobs for you to
inspect. It refuses a database that holds other jobs or a payments table of
another shape.

The charges run as stages (authorize, capture, then the ledger write with
the job's completion); a share of the payments (--refunds) gets a refund
job right after its creation. A customer's charges and refunds share a
sequence: they run one at a time, in insert order, so a refund starts only
after its payment's charge finished. The PSP limits each merchant's
requests (--merchant-rate-limit per --merchant-rate-period, fixed windows)
and the charge queue's per-merchant KeyRateLimit, derived from it, keeps
every merchant under it. After them the demo pays the merchants out with
one job graph (a payout job per merchant, a settlement report after all).

It exits non-zero if any payment is lost, charged twice, or still pending
when --timeout ends, if the PSP authorized or captured a payment twice, if
a refund is missing, made twice or started before its charge finished, if
the PSP answered a request with 429 (over the merchant's rate limit), or
if the settlement report does not equal the ledger.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.cfg.Payments, "payments", 1000, "payments to create")
	f.IntVar(&o.cfg.Workers, "workers", 4, "worker clients running at once (a crashed one is replaced)")
	f.IntVar(&o.cfg.Concurrency, "concurrency", 8, "charges each worker client runs at once")
	f.Int64Var(&o.cfg.Seed, "seed", 1, "seed for the faults and the PSP's behaviour, for repeatable runs")
	f.DurationVar(&o.cfg.Timeout, "timeout", 2*time.Minute, "give up, and fail, if payments are still pending after this")
	f.DurationVar(&o.cfg.LeaseTTL, "lease-ttl", 3*time.Second, "lease of a charge job (short, so recovery is quick)")
	f.IntVar(&o.cfg.Crashes, "crashes", 3, "worker crashes mid-charge (0: none)")
	f.IntVar(&o.cfg.Pauses, "pauses", 5, "workers pausing past their lease, then waking up (0: none)")
	f.Float64Var(&o.cfg.PSPErrorRate, "psp-error-rate", 0.05, "share of PSP requests failing with 503 (0: none)")
	f.Float64Var(&o.cfg.LostResponseRate, "lost-response-rate", 0.03, "share of charges made whose response is lost (0: none)")
	f.Float64Var(&o.cfg.SlowRate, "slow-rate", 0.01, "share of charges answered after the worker's timeout (0: none)")
	f.Float64Var(&o.cfg.DeclineRate, "decline-rate", 0.05, "share of payments the PSP declines (0: none)")
	f.Float64Var(&o.cfg.Refunds, "refunds", 0.2, "share of payments refunded right after their creation (0: none)")
	f.IntVar(&o.cfg.MerchantRateLimit, "merchant-rate-limit", 450, "PSP requests allowed per merchant per --merchant-rate-period (0: no limit)")
	f.DurationVar(&o.cfg.MerchantRatePeriod, "merchant-rate-period", time.Second, "window of --merchant-rate-limit (fixed, aligned to the Unix epoch)")
	f.BoolVar(&o.noFaults, "no-faults", false, "turn every injected fault off (declines stay: they are not faults)")
	f.BoolVar(&o.json, "json", false, "print the summary as one JSON object (progress goes to stderr)")
	return cmd
}

func runDemo(cmd *cobra.Command, g *globalOptions, o *demoOptions) error {
	cfg := o.cfg
	if cfg.Payments < 1 || cfg.Workers < 1 || cfg.Concurrency < 1 {
		return errors.New("--payments, --workers and --concurrency must be at least 1")
	}
	if o.noFaults {
		cfg.Crashes, cfg.Pauses, cfg.PSPErrorRate, cfg.LostResponseRate, cfg.SlowRate = 0, 0, 0, 0, 0
	}
	// In demo.Config zero means the default; on the command line it means none.
	none := func(v *float64) {
		if *v == 0 {
			*v = -1
		}
	}
	if cfg.Crashes == 0 {
		cfg.Crashes = -1
	}
	if cfg.Pauses == 0 {
		cfg.Pauses = -1
	}
	if cfg.MerchantRateLimit == 0 {
		cfg.MerchantRateLimit = -1
	}
	none(&cfg.Refunds)
	none(&cfg.PSPErrorRate)
	none(&cfg.LostResponseRate)
	none(&cfg.SlowRate)
	none(&cfg.DeclineRate)

	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	info := stdout
	if o.json {
		info = stderr
	}
	cfg.Progress, cfg.Terminal = info, isTerminal(info)

	// The demo runs only where it is told to by flag: LEASEHOLD_DATABASE_URL
	// names the application's database, which the demo must never touch.
	rawURL, chosen := g.databaseURL, cmd.Flags().Changed("database-url")
	where := ""
	if !chosen {
		dir, err := os.MkdirTemp("", "leasehold-demo-")
		if err != nil {
			return fmt.Errorf("create a temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "demo.db")
		rawURL = "sqlite:" + path
		where = "SQLite, a fresh file in a temporary directory (" + path + "), removed after the run"
		if os.Getenv(databaseURLEnv) != "" {
			where += "; " + databaseURLEnv + " is ignored: pass --database-url to run on a database of yours"
		}
	} else {
		// A database the user keeps may hold earlier runs: a distinct run ID
		// keeps this run's payments apart.
		cfg.RunID = fmt.Sprintf("s%d-%s", cfg.Seed, time.Now().UTC().Format("20060102T150405"))
	}
	ctx := cmd.Context()
	db, err := dburl.Open(ctx, rawURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if where == "" {
		where = fmt.Sprintf("%s (%s), kept after the run", db.URL.Backend, db.URL)
	}

	fmt.Fprintf(info, "Leasehold demo: %d payments, %d worker clients x %d charges at once, seed %d\n",
		cfg.Payments, cfg.Workers, cfg.Concurrency, cfg.Seed)
	fmt.Fprintf(info, "database: %s\n", where)
	fmt.Fprintf(info, "faults:   %s\n", describeFaults(cfg))
	fmt.Fprintf(info, "leases last %s (short for the demo), so crashed and paused workers are recovered from within seconds.\n", cfg.LeaseTTL)
	fmt.Fprintf(info, "dashboard: not running (the demo does not start one)\n\n")

	sum, runErr := runOn(ctx, db, cfg)
	if sum == nil {
		return runErr
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(sum); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, "\nSummary")
		if err := sum.WriteTable(stdout); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		if runErr == nil {
			fmt.Fprintln(stdout, verdictOK)
		}
	}
	if runErr != nil {
		return fmt.Errorf("demo failed: %w", runErr)
	}
	return nil
}

// verdictOK is what a clean run proves.
const verdictOK = `OK: every payment settled exactly once. Workers crashed, paused past their
leases and lost PSP responses, yet no payment was lost or charged twice:
each retry resumed at the stage its charge had recorded and never
authorized or captured again, the idempotency keys kept the PSP from
acting twice, the fencing token refused every write of a worker that had
lost its lease, and reconciliation settled every charge left stuck. The
payout graph then paid each merchant once, and its settlement report,
run after every payout, equals the ledger.`

// runOn runs the demo on the backend db opened.
func runOn(ctx context.Context, db *dburl.DB, cfg demo.Config) (*demo.Summary, error) {
	switch db.URL.Backend {
	case dburl.SQLite:
		return demo.Run[*sql.Tx](ctx, db.SQLite, payments.NewSQLiteStore(db.SQLiteDB), cfg)
	case dburl.MySQL:
		return demo.Run[*sql.Tx](ctx, db.MySQL, payments.NewMySQLStore(db.MySQLDB), cfg)
	default:
		return demo.Run[pgx.Tx](ctx, db.Postgres, payments.NewPostgresStore(db.Postgres.Pool()), cfg)
	}
}

func describeFaults(cfg demo.Config) string {
	pct := func(v float64) string {
		if v <= 0 {
			return "off"
		}
		return fmt.Sprintf("%g%%", v*100)
	}
	count := func(n int) string {
		if n <= 0 {
			return "off"
		}
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("worker crashes %s, pauses %s; PSP errors %s, lost responses %s, slow responses %s; declines %s",
		count(cfg.Crashes), count(cfg.Pauses), pct(cfg.PSPErrorRate), pct(cfg.LostResponseRate), pct(cfg.SlowRate), pct(cfg.DeclineRate))
}
