package leasehold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// PayoutArgs are the arguments of a job that pays a seller out.
type PayoutArgs struct {
	SellerID string `json:"seller_id"`
}

// Kind names the job type.
func (PayoutArgs) Kind() string { return "payout" }

// PayoutWorker pays sellers out; the provider times out on the first try.
type PayoutWorker struct {
	paid chan<- int64 // tells the example which job was paid
}

// Work makes the payout. An error is recorded on the attempt and the job is
// retried with backoff.
func (w *PayoutWorker) Work(ctx context.Context, job *leasehold.Job[PayoutArgs]) error {
	if job.Attempt == 1 {
		return errors.New("provider timed out")
	}
	w.paid <- job.ID
	return nil
}

// ExampleClient_JobAttempts reads a job's attempt history after a retry:
// one row per lease, with its outcome and error, kept apart from the job row.
func ExampleClient_JobAttempts() {
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

	paid := make(chan int64, 1)
	workers := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(workers, &PayoutWorker{paid: paid}, &leasehold.WorkerOpts{
		// Retry after 10 ms instead of the default 1 s, to keep the example fast.
		Retry: leasehold.ExponentialBackoff{Base: 10 * time.Millisecond},
	})
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Workers:      workers,
		PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := client.Insert(ctx, PayoutArgs{SellerID: "seller-9"}, nil); err != nil {
		log.Fatal(err)
	}

	var id int64
	select {
	case id = <-paid:
	case <-time.After(10 * time.Second):
		log.Fatal("the payout did not succeed")
	}
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	attempts, err := client.JobAttempts(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Printf("attempt %d: %s", a.Attempt, a.Outcome)
		if a.Error != "" {
			fmt.Printf(" (%s)", a.Error)
		}
		fmt.Println()
	}
	job, err := client.JobGet(ctx, id)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job: %s after %d attempts, %d error\n", job.State, job.Attempt, job.Errors)

	// Output:
	// attempt 1: failed (provider timed out)
	// attempt 2: completed
	// job: completed after 2 attempts, 1 error
}
