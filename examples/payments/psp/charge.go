// Package psp is a payment service provider (PSP) simulator served over HTTP
// on loopback, and a client for it. It behaves like a real card processor
// where it matters for the reference system in package payments:
//
//   - A charge carries an idempotency key. The first request with a key
//     decides the outcome; every later request with the same key returns that
//     outcome and never charges again, as Stripe and Adyen do. A request with
//     a key still being processed gets 409 Conflict; one with the same key but
//     different parameters gets 422.
//   - A charge can be looked up by its idempotency key, which is how a
//     reconciler learns the truth after a lost response or a crashed worker.
//   - A charge can also be made in two steps, as card processors do:
//     authorize (the decline is decided there and the amount held, no money
//     moves) and capture (the money moves), each with its own idempotency
//     key. Capturing one authorization twice under different keys is
//     refused and counted (Stats.DoubleCaptures); two authorizations of one
//     reference are counted too (Stats.DoubleAuthorizations).
//   - A captured charge can be refunded, once, under an idempotency key of
//     its own; a second refund under another key, and a refund of a charge
//     not captured, are refused and counted (Stats.DoubleRefunds,
//     Stats.RefundsBeforeCapture).
//
// It can also misbehave on purpose, with rates set in Config and decided
// deterministically from Config.Seed: latency, errors before any processing
// (503), slow responses that outlast the client's timeout, and the nasty case
// — the charge is made but the response is lost (the connection is closed
// without an answer).
//
// The simulator keeps its own ledger of money moved, independent of the
// caller's database, so a double charge (two successful charges for one
// payment reference) is detectable: Stats().DoubleCharges.
package psp

import "time"

// ChargeStatus is the state of a charge at the PSP.
type ChargeStatus string

// Charge statuses.
const (
	// StatusProcessing: the request was received and is being worked on.
	StatusProcessing ChargeStatus = "processing"
	// StatusAuthorized: authorized and held, not captured yet: no money
	// moved. Capture makes it succeeded.
	StatusAuthorized ChargeStatus = "authorized"
	// StatusSucceeded: the money was captured.
	StatusSucceeded ChargeStatus = "succeeded"
	// StatusDeclined: the card was declined; no money moved. Final.
	StatusDeclined ChargeStatus = "declined"
)

// ChargeRequest is the body of a charge request.
type ChargeRequest struct {
	// Amount is in the currency's minor unit (cents); it must be positive.
	Amount int64 `json:"amount"`
	// Currency is an ISO 4217 code ("EUR").
	Currency string `json:"currency"`
	// Reference is the merchant's own identifier for the payment. The ledger
	// groups charges by it to detect double charges.
	Reference string `json:"reference"`
	// Customer, when set, names the card holder. The simulator counts
	// charge requests of one customer that overlap (Stats.CustomerOverlaps):
	// a caller that runs one charge per customer at a time makes none.
	Customer string `json:"customer,omitempty"`
	// Merchant, when set, names the merchant account charged for;
	// Config.MerchantRateLimit bounds its requests.
	Merchant string `json:"merchant,omitempty"`
}

// Charge is a charge as the PSP records it.
type Charge struct {
	// ID is the PSP's identifier ("ch_000001").
	ID string `json:"id"`
	// IdempotencyKey is the key of the request that created it.
	IdempotencyKey string `json:"idempotency_key"`
	// Reference, Amount and Currency are as requested.
	Reference string `json:"reference"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	// Status is the charge's state.
	Status ChargeStatus `json:"status"`
	// DeclineCode says why a declined charge was declined.
	DeclineCode string `json:"decline_code,omitempty"`
	// Refunded is set once the charge has been refunded.
	Refunded bool `json:"refunded"`
	// CreatedAt is when the request was received.
	CreatedAt time.Time `json:"created_at"`
}

// Stats counts what the simulator did since it started.
type Stats struct {
	// Requests counts every HTTP request received.
	Requests int64 `json:"requests"`
	// Charges counts successful charges: money captured, by a one-step
	// charge or a capture.
	Charges int64 `json:"charges"`
	// Authorizations counts authorizations made (declines excluded).
	Authorizations int64 `json:"authorizations"`
	// Captures counts captures made (each also counted in Charges).
	Captures int64 `json:"captures"`
	// DoubleAuthorizations counts references with more than one
	// authorization. With callers that derive idempotency keys from the
	// payment it is zero.
	DoubleAuthorizations int64 `json:"double_authorizations"`
	// DoubleCaptures counts capture requests, under a new idempotency key,
	// of a charge captured or being captured: refused, no money moved, but
	// the caller captured twice. Zero for a caller that keeps its keys.
	DoubleCaptures int64 `json:"double_captures"`
	// Declines counts declined charges.
	Declines int64 `json:"declines"`
	// Replays counts charge requests answered from an earlier request with
	// the same idempotency key.
	Replays int64 `json:"replays"`
	// Refunds counts refunds made.
	Refunds int64 `json:"refunds"`
	// DoubleRefunds counts refund requests, under a new idempotency key, of
	// a charge refunded already: refused, no money moved, but the caller
	// refunded twice. Zero for a caller that keeps its keys.
	DoubleRefunds int64 `json:"double_refunds"`
	// RefundsBeforeCapture counts refund requests of a charge not captured
	// (authorized, being captured or declined): refused. Zero for a caller
	// that refunds a payment only after its charge finished.
	RefundsBeforeCapture int64 `json:"refunds_before_capture"`
	// InjectedErrors counts requests failed with 503 before any processing.
	InjectedErrors int64 `json:"injected_errors"`
	// LostResponses counts charges made whose response was dropped.
	LostResponses int64 `json:"lost_responses"`
	// SlowResponses counts requests delayed by Config.SlowDelay.
	SlowResponses int64 `json:"slow_responses"`
	// DoubleCharges counts references with more than one successful charge.
	// With callers that derive idempotency keys from the payment it is zero.
	DoubleCharges int64 `json:"double_charges"`
	// RateLimited counts requests (charges, authorizations, captures,
	// refunds) refused with 429 because their merchant was over
	// Config.MerchantRateLimit: nothing was done.
	RateLimited int64 `json:"rate_limited"`
	// CustomerOverlaps counts charge requests that arrived while another
	// charge request of the same customer was still being answered.
	CustomerOverlaps int64 `json:"customer_overlaps"`
}
