package drivertest

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientCompleteTx: CompleteTx commits the business write and the
// completion together, or neither.
func testClientCompleteTx[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	if err := env.exec.Exec(ctx, "CREATE TABLE drivertest_ledger (job_id BIGINT PRIMARY KEY, note TEXT NOT NULL)"); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		client, err := leasehold.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		tx, err := b.BeginTx(ctx, env.d)
		if err != nil {
			return err
		}
		defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
		stmt := "INSERT INTO drivertest_ledger (job_id, note) VALUES (" + itoa(j.ID) + ", 'charged')"
		if err := env.d.UnwrapExecutor(tx).Exec(ctx, stmt); err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
			return err
		}
		if j.Args.Name == "rollback" && j.Attempt == 1 {
			return errors.New("rolled back after CompleteTx")
		}
		return b.CommitTx(ctx, tx)
	}))
	c := env.client(nil, leasehold.Config{Workers: w})
	committed := insert(t, c, testArgs{Name: "commit"}, nil)
	rolledBack := insert(t, c, testArgs{Name: "rollback"}, nil)

	env.waitState(committed.ID, leasetype.JobStateCompleted, 10*time.Second)
	env.waitState(rolledBack.ID, leasetype.JobStateCompleted, 10*time.Second)
	if got := env.outcomes(committed.ID); len(got) != 1 || got[0] != leasetype.OutcomeCompleted {
		t.Fatalf("committed job outcomes = %v, want one completed", got)
	}
	// The first attempt's completion and ledger row rolled back together;
	// the retry wrote both.
	if got := env.outcomes(rolledBack.ID); len(got) != 2 || got[0] != leasetype.OutcomeFailed || got[1] != leasetype.OutcomeCompleted {
		t.Fatalf("rolled-back job outcomes = %v, want [failed completed]", got)
	}
	if err := env.exec.Exec(ctx, "DELETE FROM drivertest_ledger WHERE job_id IN ("+itoa(committed.ID)+", "+itoa(rolledBack.ID)+")"); err != nil {
		t.Fatal(err)
	}
	// CompleteTx outside a live lease is refused.
	tx, err := b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.RollbackTx(ctx, tx) //nolint:errcheck
	stale := env.job(committed.ID)
	if err := c.CompleteTx(ctx, tx, stale); !leasehold.IsLeaseLost(err) {
		t.Fatalf("CompleteTx on a completed job = %v, want a lease-lost error", err)
	}
}

// testClientInsertTx: a job inserted in a rolled-back transaction never
// exists; one in a committed transaction is worked.
func testClientInsertTx[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	var ranRolledBack atomic.Bool
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		if j.Args.Name == "rolled back" {
			ranRolledBack.Store(true)
		}
		return nil
	}))
	c := env.client(nil, leasehold.Config{Workers: w})

	tx, err := b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.InsertTx(ctx, tx, testArgs{Name: "rolled back"}, nil)
	if err != nil {
		t.Fatalf("InsertTx: %v", err)
	}
	if err := b.RollbackTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobGet(ctx, gone.Job.ID); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("job from a rolled-back transaction: JobGet = %v, want ErrNotFound", err)
	}

	tx, err = b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.InsertManyTx(ctx, tx, []leasehold.InsertManyParams{{Args: testArgs{Name: "a"}}, {Args: testArgs{Name: "b"}}})
	if err != nil {
		t.Fatalf("InsertManyTx: %v", err)
	}
	if err := b.CommitTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		env.waitState(r.Job.ID, leasetype.JobStateCompleted, 5*time.Second)
	}
	if ranRolledBack.Load() {
		t.Fatalf("the job inserted in a rolled-back transaction ran")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
