package leasehold_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// CaptureArgs are the arguments of a job that captures an authorised payment.
type CaptureArgs struct {
	PaymentID string `json:"payment_id"`
}

// Kind names the job type.
func (CaptureArgs) Kind() string { return "capture_payment" }

// CaptureWorker captures payments and records them in the application's
// payments table.
type CaptureWorker struct {
	db       *sql.DB
	captured chan<- string // tells the example the capture committed
}

// Work captures one payment. The business write and the job's completion
// commit in one transaction: either the payment is marked captured and the
// job is completed, or neither.
func (w *CaptureWorker) Work(ctx context.Context, job *leasehold.Job[CaptureArgs]) error {
	client, err := leasehold.ClientFromContext[*sql.Tx](ctx)
	if err != nil {
		return err
	}
	// Here the worker would call the payment provider, passing
	// job.IdempotencyKey() so that a retried capture is not charged twice.

	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // a no-op after Commit

	// Fenced write: a worker holding an older lease (smaller token) cannot
	// overwrite what a newer one wrote.
	if _, err := tx.ExecContext(ctx,
		"UPDATE payments SET status = 'captured', lease_token = ? WHERE id = ? AND lease_token < ?",
		job.Token(), job.Args.PaymentID, job.Token()); err != nil {
		return err
	}
	// CompleteTx refuses, and writes nothing, if this worker no longer
	// holds the job's lease; the deferred Rollback then undoes the update.
	if err := client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.captured <- job.Args.PaymentID
	return nil
}

// ExampleClient_CompleteTx completes a job inside the handler's own
// business transaction, fenced by the lease's token.
func ExampleClient_CompleteTx() {
	ctx := context.Background()

	dir, err := os.MkdirTemp("", "leasehold-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	d, db, err := sqlite.Open(filepath.Join(dir, "app.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE payments (
		id TEXT PRIMARY KEY, status TEXT NOT NULL, lease_token INTEGER NOT NULL DEFAULT 0)`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO payments (id, status) VALUES ('pay-1', 'authorised')"); err != nil {
		log.Fatal(err)
	}

	captured := make(chan string, 1)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, &CaptureWorker{db: db, captured: captured})
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Workers:      workers,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	res, err := client.Insert(ctx, CaptureArgs{PaymentID: "pay-1"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-captured:
	case <-time.After(10 * time.Second):
		log.Fatal("the capture did not commit")
	}
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	var status string
	if err := db.QueryRowContext(ctx, "SELECT status FROM payments WHERE id = 'pay-1'").Scan(&status); err != nil {
		log.Fatal(err)
	}
	job, err := client.JobGet(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	attempts, err := client.JobAttempts(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("payment:", status)
	fmt.Println("job:", job.State)
	fmt.Println("attempts:", len(attempts), attempts[0].Outcome)

	// Output:
	// payment: captured
	// job: completed
	// attempts: 1 completed
}
