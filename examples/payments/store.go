package payments

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
)

// schema is the payments table, the same SQL on SQLite and Postgres. Times
// are milliseconds on the application's clock: they drive business
// thresholds, not leases (those stay on the database clock, in the core).
const schema = `
CREATE TABLE IF NOT EXISTS payments (
    id              TEXT PRIMARY KEY,
    amount_cents    BIGINT NOT NULL CHECK (amount_cents > 0),
    currency        TEXT   NOT NULL,
    status          TEXT   NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
    idempotency_key TEXT   NOT NULL UNIQUE,
    charge_job_id   BIGINT NOT NULL DEFAULT 0,
    psp_charge_id   TEXT,
    failure_reason  TEXT,
    settled_by      TEXT,
    settled_token   BIGINT NOT NULL DEFAULT 0,
    merchant_id     TEXT   NOT NULL DEFAULT '',
    customer_id     TEXT   NOT NULL DEFAULT '',
    psp_refund_id   TEXT,
    refund_token    BIGINT NOT NULL DEFAULT 0,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS payments_pending_idx ON payments (created_at_ms) WHERE status = 'pending';
` + ledgerSchema

const paymentColumns = `id, amount_cents, currency, status, idempotency_key, charge_job_id,
    COALESCE(psp_charge_id, ''), COALESCE(failure_reason, ''), COALESCE(settled_by, ''), settled_token, merchant_id,
    customer_id, COALESCE(psp_refund_id, ''), refund_token, created_at_ms, updated_at_ms`

const (
	sqlInsertPayment = `INSERT INTO payments (id, amount_cents, currency, status, idempotency_key, merchant_id, customer_id, created_at_ms, updated_at_ms)
VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?)`
	sqlSetChargeJob = `UPDATE payments SET charge_job_id = ? WHERE id = ?`
	sqlGetPayment   = `SELECT ` + paymentColumns + ` FROM payments WHERE id = ?`
	// sqlSettle is conditional: only a pending payment is settled, so the
	// worker and the reconciler can never overwrite each other's outcome.
	sqlSettle = `UPDATE payments
SET status = ?, psp_charge_id = ?, failure_reason = ?, settled_by = ?, settled_token = ?, updated_at_ms = ?
WHERE id = ? AND status = 'pending'`
	sqlListPending = `SELECT ` + paymentColumns + ` FROM payments
WHERE status = 'pending' AND created_at_ms < ? ORDER BY created_at_ms, id LIMIT ?`
	sqlListPrefix = `SELECT ` + paymentColumns + ` FROM payments WHERE substr(id, 1, ?) = ? ORDER BY id`
	sqlCount      = `SELECT status, COUNT(*), COALESCE(SUM(CASE WHEN psp_refund_id IS NULL THEN 0 ELSE 1 END), 0),
    COALESCE(SUM(CASE WHEN psp_refund_id IS NULL THEN 0 ELSE amount_cents END), 0)
FROM payments WHERE substr(id, 1, ?) = ? GROUP BY status`
	// sqlRefund is conditional: only a succeeded payment not refunded yet
	// is marked refunded.
	sqlRefund = `UPDATE payments SET psp_refund_id = ?, refund_token = ?, updated_at_ms = ?
WHERE id = ? AND status = 'succeeded' AND psp_refund_id IS NULL`
)

// querier runs statements on a pool or in a transaction, with ? placeholders.
type querier interface {
	exec(ctx context.Context, query string, args ...any) (int64, error)
	// query calls each for every row; scan reads the row's columns.
	query(ctx context.Context, query string, each func(scan func(dest ...any) error) error, args ...any) error
}

// backend is what a Store needs from one database library.
type backend[TTx any] interface {
	begin(ctx context.Context) (TTx, error)
	commit(ctx context.Context, tx TTx) error
	rollback(ctx context.Context, tx TTx) error
	pool() querier
	tx(tx TTx) querier
}

// Store is the payments table on one database. TTx is the transaction type
// of the database's leasehold driver (*sql.Tx for SQLite, pgx.Tx for
// Postgres), so payment writes and job writes share transactions.
type Store[TTx any] struct {
	b backend[TTx]
	// Now is the application clock for created and updated times; nil means time.Now.
	Now func() time.Time
}

func (s *Store[TTx]) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Setup creates the payments table and its index when missing. It is
// idempotent; an application would run the same SQL as a migration.
func (s *Store[TTx]) Setup(ctx context.Context) error {
	for _, stmt := range strings.Split(schema, ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if _, err := s.b.pool().exec(ctx, stmt); err != nil {
			return fmt.Errorf("payments: create schema: %w", err)
		}
	}
	// A payments table that existed already must have every column the
	// store reads.
	if _, err := s.b.pool().exec(ctx, `SELECT `+paymentColumns+` FROM payments WHERE 1 = 0`); err != nil {
		return fmt.Errorf("payments: the payments table lacks the store's columns: %w", err)
	}
	if _, err := s.b.pool().exec(ctx, `SELECT entry FROM ledger WHERE 1 = 0`); err != nil {
		return fmt.Errorf("payments: the ledger table lacks the store's columns: %w", err)
	}
	return nil
}

// Begin starts a transaction on the store's database.
func (s *Store[TTx]) Begin(ctx context.Context) (TTx, error) { return s.b.begin(ctx) }

// Commit commits a transaction from Begin.
func (s *Store[TTx]) Commit(ctx context.Context, tx TTx) error { return s.b.commit(ctx, tx) }

// Rollback rolls back a transaction from Begin; after Commit it does nothing.
func (s *Store[TTx]) Rollback(ctx context.Context, tx TTx) error { return s.b.rollback(ctx, tx) }

// Create creates a payment and enqueues its charge job in one transaction.
func (s *Store[TTx]) Create(ctx context.Context, client *leasehold.Client[TTx], p NewPayment) (*Payment, error) {
	tx, err := s.b.begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("payments: begin: %w", err)
	}
	defer s.b.rollback(ctx, tx) //nolint:errcheck // no-op after commit
	out, err := s.CreateTx(ctx, tx, client, p)
	if err != nil {
		return nil, err
	}
	if err := s.b.commit(ctx, tx); err != nil {
		return nil, fmt.Errorf("payments: commit payment %s: %w", p.ID, err)
	}
	return out, nil
}

// CreateTx creates a payment inside the caller's transaction: the row and its
// charge job (unique key: the payment ID) exist only if tx commits.
func (s *Store[TTx]) CreateTx(ctx context.Context, tx TTx, client *leasehold.Client[TTx], p NewPayment) (*Payment, error) {
	if p.AmountCents <= 0 || len(p.Currency) != 3 || p.ID == "" {
		return nil, fmt.Errorf("%w %q: amount must be positive, currency a 3-letter code, ID set", ErrInvalidPayment, p.ID)
	}
	now := s.now()
	q := s.b.tx(tx)
	key := ChargeIdempotencyKey(p.ID)
	customer := p.CustomerID
	if customer == "" {
		customer = p.ID
	}
	if _, err := q.exec(ctx, sqlInsertPayment, p.ID, p.AmountCents, p.Currency, key, p.MerchantID, customer, now.UnixMilli(), now.UnixMilli()); err != nil {
		return nil, fmt.Errorf("payments: insert payment %s: %w", p.ID, err)
	}
	// The sequence (the customer) is set here too, not only derived by the
	// worker's SequenceBy: the inserting client may not have the charge
	// worker registered. The key is the merchant, whose PSP calls the
	// charge queue's KeyRateLimit bounds; none without a merchant.
	res, err := client.InsertTx(ctx, tx, ChargeArgs{PaymentID: p.ID, CustomerID: customer, MerchantID: p.MerchantID},
		&leasehold.InsertOpts{UniqueKey: p.ID, Key: p.MerchantID, Sequence: customer})
	if err != nil {
		return nil, fmt.Errorf("payments: enqueue charge of %s: %w", p.ID, err)
	}
	if _, err := q.exec(ctx, sqlSetChargeJob, res.Job.ID, p.ID); err != nil {
		return nil, fmt.Errorf("payments: link charge job of %s: %w", p.ID, err)
	}
	return &Payment{
		ID: p.ID, AmountCents: p.AmountCents, Currency: p.Currency, Status: StatusPending, IdempotencyKey: key,
		ChargeJobID: res.Job.ID, MerchantID: p.MerchantID, CustomerID: customer, CreatedAt: now, UpdatedAt: now,
	}, nil
}

// Get returns a payment, or an error wrapping ErrPaymentNotFound.
func (s *Store[TTx]) Get(ctx context.Context, id string) (*Payment, error) {
	return getPayment(ctx, s.b.pool(), id)
}

// GetTx is Get inside the caller's transaction.
func (s *Store[TTx]) GetTx(ctx context.Context, tx TTx, id string) (*Payment, error) {
	return getPayment(ctx, s.b.tx(tx), id)
}

func getPayment(ctx context.Context, q querier, id string) (*Payment, error) {
	var out *Payment
	err := q.query(ctx, sqlGetPayment, func(scan func(...any) error) error {
		p, err := scanPayment(scan)
		out = p
		return err
	}, id)
	if err != nil {
		return nil, fmt.Errorf("payments: get payment %s: %w", id, err)
	}
	if out == nil {
		return nil, fmt.Errorf("%w: %s", ErrPaymentNotFound, id)
	}
	return out, nil
}

// Settlement is the outcome written on a pending payment.
type Settlement struct {
	// Status is succeeded or failed.
	Status Status
	// PSPChargeID is the PSP's charge, if there is one.
	PSPChargeID string
	// FailureReason says why it failed.
	FailureReason string
	// SettledBy says who settled it.
	SettledBy string
	// Token is the fencing token of the lease under which it is settled.
	Token int64
}

// SettleTx settles a pending payment inside the caller's transaction, and
// writes a succeeded one's ledger entry (the merchant's money to pay out)
// in the same transaction. It reports false, and changes nothing, when the
// payment is no longer pending.
func (s *Store[TTx]) SettleTx(ctx context.Context, tx TTx, id string, st Settlement) (bool, error) {
	return s.settle(ctx, s.b.tx(tx), id, st)
}

// Settle is SettleTx in a transaction of its own.
func (s *Store[TTx]) Settle(ctx context.Context, id string, st Settlement) (bool, error) {
	tx, err := s.b.begin(ctx)
	if err != nil {
		return false, fmt.Errorf("payments: settle %s: begin: %w", id, err)
	}
	defer s.b.rollback(ctx, tx) //nolint:errcheck // no-op after commit
	ok, err := s.settle(ctx, s.b.tx(tx), id, st)
	if err != nil {
		return false, err
	}
	if err := s.b.commit(ctx, tx); err != nil {
		return false, fmt.Errorf("payments: settle %s: commit: %w", id, err)
	}
	return ok, nil
}

func (s *Store[TTx]) settle(ctx context.Context, q querier, id string, st Settlement) (bool, error) {
	if st.Status != StatusSucceeded && st.Status != StatusFailed {
		return false, fmt.Errorf("payments: settle %s: status %q is not final", id, st.Status)
	}
	n, err := q.exec(ctx, sqlSettle, string(st.Status), nullable(st.PSPChargeID), nullable(st.FailureReason),
		nullable(st.SettledBy), st.Token, s.now().UnixMilli(), id)
	if err != nil {
		return false, fmt.Errorf("payments: settle %s: %w", id, err)
	}
	if n == 1 && st.Status == StatusSucceeded {
		if _, err := q.exec(ctx, sqlInsertLedger, st.PSPChargeID, s.now().UnixMilli(), id); err != nil {
			return false, fmt.Errorf("payments: ledger entry of %s: %w", id, err)
		}
	}
	return n == 1, nil
}

// ListPending returns up to limit payments still pending that were created
// before olderThan, oldest first.
func (s *Store[TTx]) ListPending(ctx context.Context, olderThan time.Time, limit int) ([]*Payment, error) {
	return s.list(ctx, sqlListPending, olderThan.UnixMilli(), limit)
}

// ListPrefix returns every payment whose ID starts with prefix, by ID.
func (s *Store[TTx]) ListPrefix(ctx context.Context, prefix string) ([]*Payment, error) {
	return s.list(ctx, sqlListPrefix, len(prefix), prefix)
}

func (s *Store[TTx]) list(ctx context.Context, query string, args ...any) ([]*Payment, error) {
	var out []*Payment
	err := s.b.pool().query(ctx, query, func(scan func(...any) error) error {
		p, err := scanPayment(scan)
		if err == nil {
			out = append(out, p)
		}
		return err
	}, args...)
	if err != nil {
		return nil, fmt.Errorf("payments: list payments: %w", err)
	}
	return out, nil
}

// Counts are payments per status.
type Counts struct {
	Total, Pending, Succeeded, Failed int64
	// Refunded counts the payments refunded, RefundedCents sums their amounts.
	Refunded, RefundedCents int64
}

// CountPrefix counts the payments whose ID starts with prefix, per status.
func (s *Store[TTx]) CountPrefix(ctx context.Context, prefix string) (Counts, error) {
	var c Counts
	err := s.b.pool().query(ctx, sqlCount, func(scan func(...any) error) error {
		var status string
		var n, refunded, refundedCents int64
		if err := scan(&status, &n, &refunded, &refundedCents); err != nil {
			return err
		}
		c.Total += n
		c.Refunded += refunded
		c.RefundedCents += refundedCents
		switch Status(status) {
		case StatusPending:
			c.Pending = n
		case StatusSucceeded:
			c.Succeeded = n
		case StatusFailed:
			c.Failed = n
		}
		return nil
	}, len(prefix), prefix)
	if err != nil {
		return Counts{}, fmt.Errorf("payments: count payments: %w", err)
	}
	return c, nil
}

func scanPayment(scan func(...any) error) (*Payment, error) {
	var p Payment
	var status string
	var created, updated int64
	if err := scan(&p.ID, &p.AmountCents, &p.Currency, &status, &p.IdempotencyKey, &p.ChargeJobID,
		&p.PSPChargeID, &p.FailureReason, &p.SettledBy, &p.SettledToken, &p.MerchantID,
		&p.CustomerID, &p.PSPRefundID, &p.RefundToken, &created, &updated); err != nil {
		return nil, err
	}
	p.Status = Status(status)
	p.CreatedAt, p.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
	return &p, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// dollarPlaceholders rewrites ? placeholders as $1, $2, ... for Postgres.
// The package's statements have no ? inside literals.
func dollarPlaceholders(q string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

var errNoTx = errors.New("payments: transaction is nil")
