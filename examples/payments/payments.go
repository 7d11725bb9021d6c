// Package payments is Leasehold's reference payment system: the pattern of
// the founding document, end to end, for users to copy.
//
//   - A payment is a row in the application's own payments table. Creating it
//     inserts the row and enqueues its charge job in the same transaction,
//     with the payment ID as the job's unique key: there is never a payment
//     without a job, nor two jobs for one payment.
//
//   - The ChargeWorker leases the job and runs it as stages: it authorizes at
//     the payment service provider (package psp), then captures, each stage
//     checkpointed on the job (leasehold.Stages), with idempotency keys
//     derived from the payment, never from the attempt; then it records the
//     outcome with its ledger entry and completes the job in one transaction
//     fenced by the lease token (Client.CompleteTx). A retry resumes after
//     the last recorded stage; a worker that lost its lease writes nothing.
//     Transient PSP errors retry with backoff and jitter; a decline is a
//     final answer, recorded at once.
//
//   - A customer's charges and refunds run one at a time, in insert order,
//     across the whole fleet: they share the customer as their sequence
//     (InsertOpts.Sequence at insert, SequenceBy customer_id in the
//     workers' Opts), enforced in the claim on the database clock, so two
//     charges of one card never race at the PSP and a refund (RefundWorker,
//     Store.RequestRefund) starts only after its payment's charge finished.
//     Their flow key is the merchant: the charge queue's KeyRateLimit
//     (ChargeQueueConfig, MerchantKeyRateLimit) keeps each merchant within
//     the PSP's rate limit.
//
//   - A charge whose lease expires is not re-run blindly: its expiry policy is
//     stuck. The Reconciler, itself a periodic leased job, asks the PSP for
//     the truth by idempotency key and settles each stuck charge and each
//     payment pending too long: charged, declined, or safely re-queued when
//     the PSP never saw it. Its reason becomes the job's last error.
//
//   - Payouts run as one job graph (InsertPayoutBatch): a payout job per
//     merchant, and a settlement report job after all of them.
//
// The package runs on SQLite (Store[*sql.Tx], NewSQLiteStore) and Postgres
// (Store[pgx.Tx], NewPostgresStore). Package demo drives it under injected
// faults; `leasehold demo` runs that.
package payments

import (
	"errors"
	"time"

	"github.com/leasehold/leasehold"
)

// Kinds and queues of the payment jobs.
const (
	// ChargeKind is the kind of the charge job.
	ChargeKind = "payments.charge"
	// ChargeQueue is the queue charge jobs run in: the reference system's
	// own, so that its workers never claim an application's other jobs.
	ChargeQueue = "payments.charge"
	// ReconcileKind is the kind of the reconciliation job.
	ReconcileKind = "payments.reconcile"
	// ReconcileQueue is the queue reconciliation jobs run in, apart from
	// charges so that a backlog of charges never delays them.
	ReconcileQueue = "payments.reconcile"
)

// Status is a payment's state in our system.
type Status string

// Payment statuses.
const (
	// StatusPending: created, not settled yet.
	StatusPending Status = "pending"
	// StatusSucceeded: the PSP charged it.
	StatusSucceeded Status = "succeeded"
	// StatusFailed: the PSP declined it, or it can never be charged.
	StatusFailed Status = "failed"
)

// Who settled a payment, recorded in Payment.SettledBy.
const (
	// SettledByWorker: the charge worker, in its fenced completion.
	SettledByWorker = "charge_worker"
	// SettledByReconciler: the reconciler, from the PSP's answer.
	SettledByReconciler = "reconciler"
)

// ErrPaymentNotFound is returned when no payment has the given ID.
var ErrPaymentNotFound = errors.New("payments: payment not found")

// ErrInvalidPayment is wrapped by Create for a payment that can never be
// created as given (amount, currency or ID); retrying it is pointless.
var ErrInvalidPayment = errors.New("payments: invalid payment")

// Payment is a row of the payments table.
type Payment struct {
	// ID is the payment's identifier, also its charge job's unique key.
	ID string
	// AmountCents and Currency are what to charge.
	AmountCents int64
	Currency    string
	// Status is the payment's state.
	Status Status
	// IdempotencyKey is the key every charge attempt sends to the PSP. It is
	// derived from the payment (ChargeIdempotencyKey) and stored with it.
	IdempotencyKey string
	// ChargeJobID is the charge job enqueued with the payment.
	ChargeJobID int64
	// PSPChargeID is the PSP's charge, once known.
	PSPChargeID string
	// FailureReason says why a failed payment failed.
	FailureReason string
	// SettledBy says who settled it: SettledByWorker or SettledByReconciler.
	SettledBy string
	// MerchantID is the merchant paid out the payment's money.
	MerchantID string
	// CustomerID is the payment's customer (its own ID when created
	// without one): the sequence of its charge and refund jobs.
	CustomerID string
	// PSPRefundID is the PSP's refunded charge once the payment is
	// refunded (RefundWorker), empty before; RefundToken the fencing token
	// of the refund job's lease that recorded it.
	PSPRefundID string
	RefundToken int64
	// SettledToken is the fencing token of the charge lease that settled it
	// (for the reconciler, the stuck job's last token).
	SettledToken int64
	// CreatedAt and UpdatedAt are on the application's clock.
	CreatedAt, UpdatedAt time.Time
}

// NewPayment is a payment to create.
type NewPayment struct {
	// ID is the payment's identifier: letters, digits and _ - . : /.
	ID string
	// AmountCents must be positive.
	AmountCents int64
	// Currency is an ISO 4217 code.
	Currency string
	// CustomerID is the card holder; the charge worker runs one charge per
	// customer at a time. Empty means the payment is its own customer.
	CustomerID string
	// MerchantID is the merchant the money is paid out to (PayoutArgs);
	// empty is allowed.
	MerchantID string
}

// ChargeIdempotencyKey returns the PSP idempotency key of a payment's charge.
// It depends on the payment only, so every attempt — after a crash, a lost
// response, a reconciliation — sends the same key, and the PSP charges once.
func ChargeIdempotencyKey(paymentID string) string { return "charge-" + paymentID }

// ChargeArgs are the arguments of a payment's charge job.
type ChargeArgs struct {
	// PaymentID is the payment to charge.
	PaymentID string `json:"payment_id"`
	// CustomerID is the payment's customer, the job's sequence
	// (ChargeWorker.Opts: SequenceBy customer_id): a customer's charges and
	// refunds run one at a time, in insert order.
	CustomerID string `json:"customer_id"`
	// MerchantID is the payment's merchant, the job's flow-control key
	// (InsertOpts.Key at creation), which the charge queue's KeyRateLimit
	// bounds (ChargeQueueConfig).
	MerchantID string `json:"merchant_id,omitempty"`
}

// Kind implements leasehold.JobArgs.
func (ChargeArgs) Kind() string { return ChargeKind }

// InsertOpts puts charge jobs in their own queue.
func (ChargeArgs) InsertOpts() leasehold.InsertOpts {
	return leasehold.InsertOpts{Queue: ChargeQueue}
}
