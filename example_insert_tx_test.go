package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// ReceiptArgs are the arguments of a job that emails an order's receipt.
type ReceiptArgs struct {
	OrderID string `json:"order_id"`
}

// Kind names the job type.
func (ReceiptArgs) Kind() string { return "send_receipt" }

// ExampleClient_InsertTx enqueues a job in the same transaction as the
// business write: when the transaction rolls back, the job was never there.
func ExampleClient_InsertTx() {
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
	if _, err := db.ExecContext(ctx, "CREATE TABLE orders (id TEXT PRIMARY KEY, total_cents INTEGER NOT NULL)"); err != nil {
		log.Fatal(err)
	}
	client, err := leasehold.NewClient(d, nil)
	if err != nil {
		log.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total_cents) VALUES (?, ?)", "order-7", 4200); err != nil {
		log.Fatal(err)
	}
	if _, err := client.InsertTx(ctx, tx, ReceiptArgs{OrderID: "order-7"}, nil); err != nil {
		log.Fatal(err)
	}
	// Something later in the request fails (say, the stock check), so the
	// order is rolled back, and its receipt job with it.
	if err := tx.Rollback(); err != nil {
		log.Fatal(err)
	}

	var orders int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM orders").Scan(&orders); err != nil {
		log.Fatal(err)
	}
	jobs, err := client.JobList(ctx, &leasehold.JobListParams{Kind: "send_receipt"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", orders)
	fmt.Println("receipt jobs:", len(jobs))

	// Output:
	// orders: 0
	// receipt jobs: 0
}
