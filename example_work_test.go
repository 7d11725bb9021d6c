package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// WelcomeEmailArgs are the arguments of a job that sends a welcome email.
// They are stored as JSON in the job row.
type WelcomeEmailArgs struct {
	Email string `json:"email"`
}

// Kind names the job type; it selects the worker.
func (WelcomeEmailArgs) Kind() string { return "welcome_email" }

// WelcomeEmailWorker sends welcome emails.
type WelcomeEmailWorker struct {
	sent chan<- string // tells the example the email went out
}

// Work sends one email. Returning nil completes the job.
func (w *WelcomeEmailWorker) Work(ctx context.Context, job *leasehold.Job[WelcomeEmailArgs]) error {
	// A real worker would call the email provider here, passing
	// job.IdempotencyKey() so that a retry never sends twice.
	w.sent <- job.Args.Email
	return nil
}

// Example_insertAndWork inserts a job and works it with a client on SQLite.
func Example_insertAndWork() {
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

	sent := make(chan string, 1)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, &WelcomeEmailWorker{sent: sent})
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

	res, err := client.Insert(ctx, WelcomeEmailArgs{Email: "ada@example.com"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("inserted:", res.Job.State)

	select {
	case email := <-sent:
		fmt.Println("sent welcome email to", email)
	case <-time.After(10 * time.Second):
		log.Fatal("the job did not run")
	}
	// Stop waits for running handlers and writes their outcomes.
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	job, err := client.JobGet(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after work:", job.State)

	// Output:
	// inserted: available
	// sent welcome email to ada@example.com
	// after work: completed
}
