package postgres

import (
	"testing"
	"time"
)

// TestBoundTxKeepsTighterSettings: bounding a transaction lowers the
// timeouts that are off or looser than the bound, keeps one already
// tighter, skips a setting the server lacks, and lasts only for the
// transaction.
func TestBoundTxKeepsTighterSettings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only test transaction
	if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '50ms'"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = '1min'"); err != nil {
		t.Fatal(err)
	}
	e := d.UnwrapExecutor(tx).(*executor)
	if err := e.boundTx(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	var stmt, idle string
	var txTimeout *string
	if err := tx.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout'), current_setting('transaction_timeout', true)").Scan(&stmt, &idle, &txTimeout); err != nil {
		t.Fatal(err)
	}
	if stmt != "50ms" {
		t.Errorf("statement_timeout = %s, want the tighter 50ms kept", stmt)
	}
	if idle != "5s" {
		t.Errorf("idle_in_transaction_session_timeout = %s, want the bound 5s in place of 1min", idle)
	}
	if txTimeout != nil && *txTimeout != "5s" {
		t.Errorf("transaction_timeout = %s, want the bound 5s (it was off)", *txTimeout)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := d.Pool().QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after == "5s" {
		t.Error("the bound outlived its transaction")
	}
}
