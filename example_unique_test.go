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

// RefundArgs are the arguments of a job that refunds an order.
type RefundArgs struct {
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
}

// Kind names the job type.
func (RefundArgs) Kind() string { return "refund" }

// ExampleInsertOpts_uniqueKey makes an insert idempotent: while a job with
// the same unique key is unfinished, inserting again returns that job with
// UniqueSkipped set, so a refund requested twice is queued once.
func ExampleInsertOpts_uniqueKey() {
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

	// A client without workers only inserts.
	client, err := leasehold.NewClient(d, nil)
	if err != nil {
		log.Fatal(err)
	}
	refund := RefundArgs{OrderID: "order-42", Cents: 1999}
	opts := &leasehold.InsertOpts{UniqueKey: "refund:order-42"}

	first, err := client.Insert(ctx, refund, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first insert skipped:", first.UniqueSkipped)

	// The user clicks "refund" again.
	second, err := client.Insert(ctx, refund, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second insert skipped:", second.UniqueSkipped)
	fmt.Println("same job:", second.Job.ID == first.Job.ID)

	jobs, err := client.JobList(ctx, &leasehold.JobListParams{Kind: "refund"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("refund jobs:", len(jobs))

	// Output:
	// first insert skipped: false
	// second insert skipped: true
	// same job: true
	// refund jobs: 1
}
