package payments

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// PSPCallsPerStart is the most PSP requests one start of a charge-queue job
// makes: a charge attempt authorizes and captures (one that resumes after
// its authorization only captures), a refund attempt refunds. The PSP
// client never resends a request by itself, and a retry is a new start.
const PSPCallsPerStart = 2

// MerchantKeyRateLimit returns the charge queue's KeyRateLimit (per flow
// key, the merchant) that keeps every merchant within a PSP limit of
// pspLimit requests per fixed window of pspPeriod aligned to the Unix epoch
// (psp.Config.MerchantRateLimit), for workers whose attempts make their PSP
// calls within callDeadline of their start (ChargeWorker.CallDeadline,
// RefundWorker.CallDeadline). It fails when no such limit exists.
//
// Why it holds: a PSP window [a, a+P) receives requests only from attempts
// that started in [a−D, a+P), a span of P+D (D the call deadline: no
// request is sent later than D after its start). The queue's windows have
// the same period P but run on the database clock, so they need not line
// up with the PSP's: a span of P+D meets at most ⌈(P+D)/P⌉+1 of them (3
// for D ≤ P). Each of those windows starts at most N jobs of the merchant,
// each making at most PSPCallsPerStart requests, so the PSP window sees at
// most PSPCallsPerStart·N·(⌈(P+D)/P⌉+1) ≤ pspLimit requests when N is the
// floor of pspLimit over that factor. A constant offset between the two
// clocks does not change the count; the deadline is checked against the
// lease's grant on the database clock, so add the clocks' largest
// difference to callDeadline when they may differ.
func MerchantKeyRateLimit(pspLimit int, pspPeriod, callDeadline time.Duration) (*leasehold.RateLimit, error) {
	if pspLimit < 1 || pspPeriod < time.Millisecond || callDeadline <= 0 {
		return nil, fmt.Errorf("payments: merchant rate limit needs a PSP limit ≥ 1, a period ≥ 1ms and a positive call deadline (got %d per %s, deadline %s)",
			pspLimit, pspPeriod, callDeadline)
	}
	windows := int((pspPeriod+callDeadline+pspPeriod-1)/pspPeriod) + 1
	n := pspLimit / (PSPCallsPerStart * windows)
	if n < 1 {
		return nil, fmt.Errorf("payments: a PSP limit of %d per %s is too small for %d calls per start over %d queue windows; lower the call deadline or raise the limit",
			pspLimit, pspPeriod, PSPCallsPerStart, windows)
	}
	return &leasehold.RateLimit{Limit: n, Period: pspPeriod}, nil
}

// ChargeQueueConfig is the QueueConfig of ChargeQueue for a worker client
// that runs maxWorkers charges and refunds at once: the keyed claim (for
// the customers' sequences), and merchantLimit, from MerchantKeyRateLimit,
// as the per-merchant KeyRateLimit (nil for none). Give every client of the
// fleet the same limit: each enforces its own.
func ChargeQueueConfig(maxWorkers int, merchantLimit *leasehold.RateLimit) leasehold.QueueConfig {
	return leasehold.QueueConfig{MaxWorkers: maxWorkers, KeyRateLimit: merchantLimit, Sequenced: true}
}

// errCallDeadline is returned by an attempt that reached a PSP call after
// its CallDeadline: retryable, the retry is a new start.
var errCallDeadline = errors.New("payments: the attempt's PSP call deadline passed; retrying as a new start the merchant rate limit counts")

// callContext returns the context of one PSP call of an attempt whose
// lease was granted at row.LeasedAt, cut off deadline after it (no
// deadline when it is zero), or errCallDeadline when that time has passed.
func callContext(ctx context.Context, row *leasetype.JobRow, deadline time.Duration) (context.Context, context.CancelFunc, error) {
	if deadline <= 0 || row.LeasedAt == nil {
		return ctx, func() {}, nil
	}
	at := row.LeasedAt.Add(deadline)
	if !time.Now().Before(at) {
		return ctx, func() {}, errCallDeadline
	}
	ctx, cancel := context.WithDeadline(ctx, at)
	return ctx, cancel, nil
}
