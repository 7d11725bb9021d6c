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

// InvoiceArgs are the arguments of a job that renders an invoice.
type InvoiceArgs struct {
	Number string `json:"number"`
}

// Kind names the job type.
func (InvoiceArgs) Kind() string { return "render_invoice" }

// InvoiceWorker renders invoices; the renderer is busy on the first try.
type InvoiceWorker struct{}

// Work renders one invoice.
func (InvoiceWorker) Work(ctx context.Context, job *leasehold.Job[InvoiceArgs]) error {
	if job.Attempt == 1 {
		return errors.New("renderer busy")
	}
	return nil
}

// ExampleClient_Subscribe waits for a job to finish without polling: the
// client sends an event once each outcome is written.
func ExampleClient_Subscribe() {
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

	workers := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(workers, InvoiceWorker{}, &leasehold.WorkerOpts{
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
	// Subscribe before inserting, so that no event is missed.
	events, unsubscribe, err := client.Subscribe(
		leasehold.EventKindJobCompleted, leasehold.EventKindJobFailed, leasehold.EventKindJobDiscarded)
	if err != nil {
		log.Fatal(err)
	}
	defer unsubscribe()
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	res, err := client.Insert(ctx, InvoiceArgs{Number: "INV-42"}, nil)
	if err != nil {
		log.Fatal(err)
	}

	for done := false; !done; {
		select {
		case e := <-events:
			if e.Job.ID != res.Job.ID {
				continue
			}
			fmt.Printf("%s: attempt %d, state %s", e.Kind, e.Job.Attempt, e.Job.State)
			if e.Kind == leasehold.EventKindJobFailed {
				fmt.Printf(" (%s)", e.Job.LastError)
			}
			fmt.Println()
			done = e.Job.State.Finalized()
		case <-time.After(10 * time.Second):
			log.Fatal("the job did not finish")
		}
	}
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}

	// Output:
	// job_failed: attempt 1, state retryable (renderer busy)
	// job_completed: attempt 2, state completed
}
