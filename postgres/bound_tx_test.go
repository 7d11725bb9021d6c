package postgres

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leasetype"
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

// TestFinishBoundsTx: a completion with a TxBound in the
// caller's transaction bounds that transaction in the completion's own
// statement, plain completions and other outcomes alike, keeping a
// tighter setting.
func TestFinishBoundsTx(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	insertJobs(t, exec, "q", 2)
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 2, Owner: "w", DefaultLeaseTTL: time.Minute})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	for i, item := range []*driver.JobFinish{
		{ID: jobs[0].ID, Token: jobs[0].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted},
		{ID: jobs[1].ID, Token: jobs[1].LeaseToken, State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "boom", CountError: true},
	} {
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL statement_timeout = '50ms'"); err != nil {
			t.Fatal(err)
		}
		ids, err := d.UnwrapExecutor(tx).JobFinish(ctx, &driver.JobFinishParams{Owner: "w", TxBound: 5 * time.Second, Items: []*driver.JobFinish{item}})
		if err != nil || len(ids) != 1 || ids[0] != item.ID {
			t.Fatalf("item %d: finish = %v, %v; want [%d]", i, ids, err, item.ID)
		}
		var stmt, idle string
		if err := tx.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&stmt, &idle); err != nil {
			t.Fatal(err)
		}
		if stmt != "50ms" || idle != "5s" {
			t.Errorf("item %d: statement_timeout %s, idle_in_transaction_session_timeout %s; want 50ms kept and 5s", i, stmt, idle)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBoundThroughPgBouncer: behind PgBouncer in transaction mode a
// completion in the caller's transaction bounds that transaction and keeps
// the bound to it: the next transaction on the same server connection has
// the server's own settings.
func TestBoundThroughPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b := pgtest.PgBouncer(t, &pgtest.BouncerOptions{PoolSize: 1})
	d := bouncerDriver(t, b, "exec", Options{})
	exec := d.GetExecutor()
	insertJobs(t, exec, "q", 1)
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1, Owner: "w", DefaultLeaseTTL: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(jobs), err)
	}
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	ids, err := d.UnwrapExecutor(tx).JobFinish(ctx, &driver.JobFinishParams{Owner: "w", TxBound: 5 * time.Second,
		Items: []*driver.JobFinish{{ID: jobs[0].ID, Token: jobs[0].LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}}})
	if err != nil || len(ids) != 1 {
		t.Fatalf("complete = %v, %v; want job %d", ids, err, jobs[0].ID)
	}
	var stmt, idle string
	if err := tx.QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&stmt, &idle); err != nil {
		t.Fatal(err)
	}
	if stmt != "5s" || idle != "5s" {
		t.Errorf("in the transaction: statement_timeout %s, idle_in_transaction_session_timeout %s; want 5s and 5s", stmt, idle)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// One server connection: the next transaction is on the same backend.
	if err := d.Pool().QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&stmt, &idle); err != nil {
		t.Fatal(err)
	}
	if stmt == "5s" || idle == "5s" {
		t.Errorf("after the commit: statement_timeout %s, idle_in_transaction_session_timeout %s; the bound outlived its transaction", stmt, idle)
	}
}
