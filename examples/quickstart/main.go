// Command quickstart is the README's first program: a charge job whose
// business write and completion commit in one transaction, fenced by its
// lease, on SQLite.
package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// ChargeArgs are a charge job's arguments, stored as JSON in its row.
type ChargeArgs struct {
	PaymentID int64 `json:"payment_id"`
}

// Kind selects the worker.
func (ChargeArgs) Kind() string { return "charge" }

// ChargeWorker charges a payment and records it.
type ChargeWorker struct {
	db   *sql.DB
	done chan int64
}

// Work charges once per attempt with a key the same for every attempt, then
// records the payment and completes the job in one transaction. Returning
// an error retries it with backoff.
func (w *ChargeWorker) Work(ctx context.Context, job *leasehold.Job[ChargeArgs]) error {
	fmt.Printf("charging payment %d (key %s)\n", job.Args.PaymentID, job.IdempotencyKey())
	client, err := leasehold.ClientFromContext[*sql.Tx](ctx)
	if err != nil {
		return err
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE payments SET status = 'succeeded' WHERE id = ?`, job.Args.PaymentID); err != nil {
		return err
	}
	// Fenced: if another worker holds the job now, nothing is written.
	if err := client.CompleteTx(ctx, tx, job.JobRow); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	w.done <- job.Args.PaymentID
	return nil
}

func main() {
	ctx := context.Background()
	d, db, err := sqlite.Open("quickstart.db") // or postgres.New(pgxPool)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS payments (id INTEGER PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT OR REPLACE INTO payments (id, status) VALUES (42, 'pending')`); err != nil {
		log.Fatal(err)
	}

	worker := &ChargeWorker{db: db, done: make(chan int64, 1)}
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, worker)
	client, err := leasehold.NewClient(d, &leasehold.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(context.Background())

	res, err := client.Insert(ctx, ChargeArgs{PaymentID: 42}, &leasehold.InsertOpts{UniqueKey: "payment-42"})
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-worker.done:
	case <-time.After(10 * time.Second):
		log.Fatal("the job did not run")
	}
	job, err := client.JobGet(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	var status string
	if err := db.QueryRowContext(ctx, `SELECT status FROM payments WHERE id = 42`).Scan(&status); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job %d %s after %d attempt(s); payment 42 %s\n", job.ID, job.State, job.Attempt, status)
}
