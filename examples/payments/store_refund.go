package payments

import (
	"context"
	"fmt"
)

// RefundTx records, inside the caller's transaction, the refund of a
// succeeded payment at the PSP (pspChargeID, the refunded charge) under the
// refund job's lease token, and writes its ledger entry: the negated amount,
// which the merchant's next payout takes off. It reports false, and changes
// nothing, when the payment is not succeeded or is refunded already.
func (s *Store[TTx]) RefundTx(ctx context.Context, tx TTx, id, pspChargeID string, token int64) (bool, error) {
	q := s.b.tx(tx)
	n, err := q.exec(ctx, sqlRefund, pspChargeID, token, s.now().UnixMilli(), id)
	if err != nil {
		return false, fmt.Errorf("payments: refund %s: %w", id, err)
	}
	if n != 1 {
		return false, nil
	}
	if _, err := q.exec(ctx, sqlInsertRefundLedger, pspChargeID, s.now().UnixMilli(), id); err != nil {
		return false, fmt.Errorf("payments: ledger entry of the refund of %s: %w", id, err)
	}
	return true, nil
}
