package payments

import (
	"context"
	"fmt"
)

// ledgerSchema is the ledger, payout and settlement report tables, the same
// SQL on SQLite and Postgres. The ledger has one entry per succeeded
// payment, written in the transaction that settles it (Store.SettleTx),
// and one of the negated amount per refunded payment (entry 'refund',
// written with the refund: Store.RefundTx);
// a payout takes a merchant's unpaid entries; a settlement report sums a
// payout batch.
const ledgerSchema = `
CREATE TABLE IF NOT EXISTS ledger (
    payment_id    TEXT   NOT NULL,
    entry         TEXT   NOT NULL DEFAULT 'charge' CHECK (entry IN ('charge', 'refund')),
    merchant_id   TEXT   NOT NULL,
    amount_cents  BIGINT NOT NULL,
    currency      TEXT   NOT NULL,
    psp_charge_id TEXT   NOT NULL,
    payout_id     TEXT,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (payment_id, entry)
);
CREATE INDEX IF NOT EXISTS ledger_unpaid_idx ON ledger (merchant_id) WHERE payout_id IS NULL;
CREATE INDEX IF NOT EXISTS ledger_payout_idx ON ledger (payout_id);
CREATE TABLE IF NOT EXISTS payouts (
    id            TEXT PRIMARY KEY,
    batch_id      TEXT   NOT NULL,
    merchant_id   TEXT   NOT NULL,
    amount_cents  BIGINT NOT NULL,
    entries       BIGINT NOT NULL,
    job_token     BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS payouts_batch_idx ON payouts (batch_id);
CREATE TABLE IF NOT EXISTS settlement_reports (
    batch_id       TEXT PRIMARY KEY,
    payouts        BIGINT NOT NULL,
    payout_cents   BIGINT NOT NULL,
    ledger_entries BIGINT NOT NULL,
    ledger_cents   BIGINT NOT NULL,
    unpaid_entries BIGINT NOT NULL,
    created_at_ms  BIGINT NOT NULL
);
`

const (
	// sqlInsertLedger writes a settled payment's ledger entry from its row.
	sqlInsertLedger = `INSERT INTO ledger (payment_id, merchant_id, amount_cents, currency, psp_charge_id, created_at_ms)
SELECT id, merchant_id, amount_cents, currency, ?, ? FROM payments WHERE id = ?`
	// sqlInsertRefundLedger writes a refunded payment's negated entry.
	sqlInsertRefundLedger = `INSERT INTO ledger (payment_id, entry, merchant_id, amount_cents, currency, psp_charge_id, created_at_ms)
SELECT id, 'refund', merchant_id, -amount_cents, currency, ?, ? FROM payments WHERE id = ?`
	sqlGetPayout = `SELECT id, batch_id, merchant_id, amount_cents, entries, job_token FROM payouts WHERE id = ?`
	// sqlTakeUnpaid assigns a merchant's unpaid entries to a payout.
	sqlTakeUnpaid = `UPDATE ledger SET payout_id = ? WHERE merchant_id = ? AND payout_id IS NULL`
	sqlSumPayout  = `SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM ledger WHERE payout_id = ?`
	sqlInsertPay  = `INSERT INTO payouts (id, batch_id, merchant_id, amount_cents, entries, job_token, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlSumBatch   = `SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM payouts WHERE batch_id = ?`
	// sqlSumLedger sums every ledger entry of the batch's merchants, paid
	// out or not, and those not paid out.
	sqlSumLedger = `SELECT COUNT(*), COALESCE(SUM(amount_cents), 0), COALESCE(SUM(CASE WHEN payout_id IS NULL THEN 1 ELSE 0 END), 0)
FROM ledger WHERE merchant_id IN (SELECT merchant_id FROM payouts WHERE batch_id = ?)`
	sqlGetReport = `SELECT batch_id, payouts, payout_cents, ledger_entries, ledger_cents, unpaid_entries FROM settlement_reports WHERE batch_id = ?`
	sqlInsertRep = `INSERT INTO settlement_reports (batch_id, payouts, payout_cents, ledger_entries, ledger_cents, unpaid_entries, created_at_ms)
VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlSumMerchantLedger = `SELECT COUNT(*), COALESCE(SUM(amount_cents), 0) FROM ledger WHERE substr(merchant_id, 1, ?) = ?`
)

// Payout is a row of the payouts table: one merchant's ledger entries of
// one payout batch, paid out once.
type Payout struct {
	// ID is the batch and merchant (PayoutID).
	ID, BatchID, MerchantID string
	// AmountCents and Entries are the sum and count of the entries paid.
	AmountCents, Entries int64
	// JobToken is the fencing token of the payout job that wrote it.
	JobToken int64
}

// PayoutID is the ID of a merchant's payout in a batch.
func PayoutID(batchID, merchantID string) string { return batchID + ":" + merchantID }

// PayoutTx pays out, inside the caller's transaction, every ledger entry of
// merchantID not paid out yet, as the batch's payout of the merchant. It
// is idempotent: the batch's payout of the merchant is made once, and a
// second call returns it with created false.
func (s *Store[TTx]) PayoutTx(ctx context.Context, tx TTx, batchID, merchantID string, token int64) (p *Payout, created bool, err error) {
	q := s.b.tx(tx)
	id := PayoutID(batchID, merchantID)
	if p, err := getPayout(ctx, q, id); err != nil || p != nil {
		return p, false, err
	}
	if _, err := q.exec(ctx, sqlTakeUnpaid, id, merchantID); err != nil {
		return nil, false, fmt.Errorf("payments: payout %s: take entries: %w", id, err)
	}
	p = &Payout{ID: id, BatchID: batchID, MerchantID: merchantID, JobToken: token}
	if err := q.query(ctx, sqlSumPayout, func(scan func(...any) error) error {
		return scan(&p.Entries, &p.AmountCents)
	}, id); err != nil {
		return nil, false, fmt.Errorf("payments: payout %s: sum: %w", id, err)
	}
	if _, err := q.exec(ctx, sqlInsertPay, id, batchID, merchantID, p.AmountCents, p.Entries, token, s.now().UnixMilli()); err != nil {
		return nil, false, fmt.Errorf("payments: payout %s: insert: %w", id, err)
	}
	return p, true, nil
}

// GetPayout returns the batch's payout of a merchant, nil when not made.
func (s *Store[TTx]) GetPayout(ctx context.Context, batchID, merchantID string) (*Payout, error) {
	return getPayout(ctx, s.b.pool(), PayoutID(batchID, merchantID))
}

func getPayout(ctx context.Context, q querier, id string) (*Payout, error) {
	var out *Payout
	err := q.query(ctx, sqlGetPayout, func(scan func(...any) error) error {
		var p Payout
		if err := scan(&p.ID, &p.BatchID, &p.MerchantID, &p.AmountCents, &p.Entries, &p.JobToken); err != nil {
			return err
		}
		out = &p
		return nil
	}, id)
	if err != nil {
		return nil, fmt.Errorf("payments: get payout %s: %w", id, err)
	}
	return out, nil
}

// SettlementReport is a row of the settlement_reports table: what a payout
// batch paid, against the ledger of its merchants.
type SettlementReport struct {
	// BatchID is the payout batch.
	BatchID string
	// Payouts and PayoutCents count and sum the batch's payouts.
	Payouts, PayoutCents int64
	// LedgerEntries and LedgerCents count and sum every ledger entry of the
	// batch's merchants; UnpaidEntries those no payout took.
	LedgerEntries, LedgerCents, UnpaidEntries int64
}

// Balanced reports whether the payouts paid exactly the ledger.
func (r *SettlementReport) Balanced() bool {
	return r.PayoutCents == r.LedgerCents && r.UnpaidEntries == 0
}

// ReportTx writes, inside the caller's transaction, the settlement report
// of a payout batch; a second call returns the report written first.
func (s *Store[TTx]) ReportTx(ctx context.Context, tx TTx, batchID string) (*SettlementReport, error) {
	q := s.b.tx(tx)
	if r, err := getReport(ctx, q, batchID); err != nil || r != nil {
		return r, err
	}
	r := &SettlementReport{BatchID: batchID}
	if err := q.query(ctx, sqlSumBatch, func(scan func(...any) error) error {
		return scan(&r.Payouts, &r.PayoutCents)
	}, batchID); err != nil {
		return nil, fmt.Errorf("payments: report %s: sum payouts: %w", batchID, err)
	}
	if err := q.query(ctx, sqlSumLedger, func(scan func(...any) error) error {
		return scan(&r.LedgerEntries, &r.LedgerCents, &r.UnpaidEntries)
	}, batchID); err != nil {
		return nil, fmt.Errorf("payments: report %s: sum ledger: %w", batchID, err)
	}
	if _, err := q.exec(ctx, sqlInsertRep, batchID, r.Payouts, r.PayoutCents, r.LedgerEntries, r.LedgerCents, r.UnpaidEntries, s.now().UnixMilli()); err != nil {
		return nil, fmt.Errorf("payments: report %s: insert: %w", batchID, err)
	}
	return r, nil
}

// GetReport returns the settlement report of a batch, nil when not written.
func (s *Store[TTx]) GetReport(ctx context.Context, batchID string) (*SettlementReport, error) {
	return getReport(ctx, s.b.pool(), batchID)
}

func getReport(ctx context.Context, q querier, batchID string) (*SettlementReport, error) {
	var out *SettlementReport
	err := q.query(ctx, sqlGetReport, func(scan func(...any) error) error {
		var r SettlementReport
		if err := scan(&r.BatchID, &r.Payouts, &r.PayoutCents, &r.LedgerEntries, &r.LedgerCents, &r.UnpaidEntries); err != nil {
			return err
		}
		out = &r
		return nil
	}, batchID)
	if err != nil {
		return nil, fmt.Errorf("payments: get report %s: %w", batchID, err)
	}
	return out, nil
}

// LedgerTotal counts and sums the ledger entries of the merchants whose ID
// starts with prefix.
func (s *Store[TTx]) LedgerTotal(ctx context.Context, merchantPrefix string) (entries, cents int64, err error) {
	err = s.b.pool().query(ctx, sqlSumMerchantLedger, func(scan func(...any) error) error {
		return scan(&entries, &cents)
	}, len(merchantPrefix), merchantPrefix)
	if err != nil {
		return 0, 0, fmt.Errorf("payments: sum ledger: %w", err)
	}
	return entries, cents, nil
}
