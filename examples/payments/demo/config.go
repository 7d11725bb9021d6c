// Package demo runs the payments reference system under injected faults and
// proves it lost and doubled nothing: it creates payments, works them with
// several worker clients in one process while workers crash mid-charge,
// workers pause past their lease and wake up, and the PSP fails, answers
// slowly and loses responses; it refunds a share of the payments right after
// their creation (each refund waits for its charge: the customer's
// sequence) under the PSP's per-merchant rate limit (which the charge
// queue's KeyRateLimit respects); then it checks every payment and refund
// against the PSP's own ledger. `leasehold demo` is its command line.
package demo

import (
	"io"
	"log/slog"
	"time"
)

// Config sets up a demo run. Zero fields take the defaults noted.
type Config struct {
	// Payments is how many payments to create; default 1000.
	Payments int
	// Customers is how many customers the payments belong to (round
	// robin); each runs one charge at a time. Default Payments/2, at least 1.
	Customers int
	// Merchants is how many merchants the payments are paid out to (round
	// robin): the payout batch after the charges has one payout job per
	// merchant. Default 5, at most Payments.
	Merchants int
	// Workers is how many worker clients run at once; default 4. A crashed
	// one is replaced.
	Workers int
	// Concurrency is how many charges each worker client runs at once; default 8.
	Concurrency int
	// Seed makes the faults and the PSP's behaviour repeatable; 0 means 1.
	Seed int64
	// Timeout bounds the whole run; default 2 minutes.
	Timeout time.Duration
	// RunID prefixes the payment IDs of this run; default "s<seed>".
	RunID string

	// LeaseTTL is the charge lease; default 3 s, short so that recovery is
	// visible quickly.
	LeaseTTL time.Duration
	// ReconcileEvery is how often a reconciliation job is enqueued; default 1 s.
	ReconcileEvery time.Duration
	// PendingAfter is when the reconciler starts checking a pending payment
	// whose job is not stuck; default 5 s.
	PendingAfter time.Duration

	// Crashes is how many worker clients crash mid-charge (before the
	// authorization, between the authorize and the capture stage, or after
	// the capture); negative means none; default 3.
	Crashes int
	// Pauses is how many charges pause past their lease after the PSP
	// answered and then try to record it; negative means none; default 5.
	Pauses int
	// PSPErrorRate is the share of PSP requests failed with 503; default
	// 0.05; negative means none. The same for the rates below.
	PSPErrorRate float64
	// LostResponseRate is the share of charges made whose response is lost;
	// default 0.03.
	LostResponseRate float64
	// SlowRate is the share of charges that outlast the client's timeout;
	// default 0.01.
	SlowRate float64
	// DeclineRate is the share of payments the PSP declines; default 0.05.
	DeclineRate float64
	// PSPLatency is the longest PSP processing time (drawn uniformly from
	// a fifth of it up to it); default 20 ms.
	PSPLatency time.Duration
	// PSPTimeout is the charge worker's HTTP timeout; default 500 ms.
	PSPTimeout time.Duration

	// Refunds is the share of payments refunded: each gets a refund job
	// right after its creation, in its customer's sequence after its
	// charge; default 0.2; negative means none.
	Refunds float64
	// MerchantRateLimit is the PSP's limit of requests (authorizations,
	// captures, refunds) per merchant in each fixed window of
	// MerchantRatePeriod aligned to the Unix epoch; default 300; negative
	// means none. The charge queue's per-merchant KeyRateLimit is derived
	// from it (payments.MerchantKeyRateLimit), so the PSP answers no 429.
	MerchantRateLimit int
	// MerchantRatePeriod is the window of MerchantRateLimit; default 1 s.
	MerchantRatePeriod time.Duration
	// NoQueueRateLimit leaves the charge queue without its per-merchant
	// KeyRateLimit while the PSP still enforces MerchantRateLimit: the PSP
	// answers 429s and the run fails. For tests of that check.
	NoQueueRateLimit bool

	// Progress receives live progress; nil for none.
	Progress io.Writer
	// Terminal redraws one status line on Progress instead of printing
	// periodic lines.
	Terminal bool
	// Logger receives the clients' logs; nil discards them (a demo's
	// crashed workers warn a lot, by design).
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	rate := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	def(&c.Payments, 1000)
	def(&c.Customers, max(c.Payments/2, 1))
	def(&c.Merchants, min(5, c.Payments))
	def(&c.Workers, 4)
	def(&c.Concurrency, 8)
	def(&c.Crashes, 3)
	def(&c.Pauses, 5)
	def(&c.MerchantRateLimit, 450)
	c.MerchantRateLimit = max(c.MerchantRateLimit, 0)
	c.Crashes, c.Pauses = max(c.Crashes, 0), max(c.Pauses, 0)
	if c.Seed == 0 {
		c.Seed = 1
	}
	defDur(&c.Timeout, 2*time.Minute)
	defDur(&c.LeaseTTL, 3*time.Second)
	defDur(&c.ReconcileEvery, time.Second)
	defDur(&c.PendingAfter, 5*time.Second)
	defDur(&c.PSPLatency, 20*time.Millisecond)
	defDur(&c.PSPTimeout, 500*time.Millisecond)
	defDur(&c.MerchantRatePeriod, time.Second)
	rate(&c.Refunds, 0.2)
	rate(&c.PSPErrorRate, 0.05)
	rate(&c.LostResponseRate, 0.03)
	rate(&c.SlowRate, 0.01)
	rate(&c.DeclineRate, 0.05)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}
