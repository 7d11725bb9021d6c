package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// ChargeArgs are the arguments of a job that charges a card.
type ChargeArgs struct {
	PaymentID string `json:"payment_id"`
	Cents     int64  `json:"cents"`
}

// Kind names the job type.
func (ChargeArgs) Kind() string { return "charge_card" }

// ChargeWorker charges cards through a payment provider.
type ChargeWorker struct{}

// Work charges the card. It never runs in this example: the job's only
// attempt belongs to a worker that crashed.
func (ChargeWorker) Work(ctx context.Context, job *leasehold.Job[ChargeArgs]) error {
	fmt.Println("charging", job.Args.PaymentID)
	return nil
}

// ExampleClient_ResolveStuck shows the stuck expiry policy. A charge whose
// worker crashed mid-call may or may not have reached the payment provider,
// so it is not retried blindly: when its lease expires it moves to stuck,
// and waits for reconciliation to say what happened.
func ExampleClient_ResolveStuck() {
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
	leasehold.AddWorkerWithOpts(workers, ChargeWorker{}, &leasehold.WorkerOpts{
		ExpiryPolicy: leasetype.ExpiryStuck,
	})
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Workers:         workers,
		PollInterval:    50 * time.Millisecond,
		WatcherInterval: 50 * time.Millisecond, // how often expired leases are reclaimed
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := client.Insert(ctx, ChargeArgs{PaymentID: "pay-7", Cents: 2500}, nil)
	if err != nil {
		log.Fatal(err)
	}

	// Another worker process claims the charge and crashes before it
	// finishes. Simulated here with the driver's claim statement: the lease
	// is taken, with the stuck policy, and never renewed.
	if _, err := d.GetExecutor().JobClaim(ctx, &driver.JobClaimParams{
		Queue: "default", Max: 1, Owner: "crashed-worker",
		DefaultLeaseTTL: 100 * time.Millisecond, StuckKinds: []string{"charge_card"},
	}); err != nil {
		log.Fatal(err)
	}

	// This client's expirer reclaims the expired lease.
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)
	job := res.Job
	for deadline := time.Now().Add(10 * time.Second); job.State != leasetype.JobStateStuck; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			log.Fatalf("job is %s, want stuck", job.State)
		}
		if job, err = client.JobGet(ctx, res.Job.ID); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("job: %s, lease expiries %d, handler errors %d\n", job.State, job.Expiries, job.Errors)

	// Reconciliation asks the provider, which has the charge: the work
	// happened, so the job is completed without running again.
	job, err = client.ResolveStuck(ctx, job.ID, leasehold.ResolveSucceeded, "provider shows the charge captured")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("job: %s (%s)\n", job.State, job.LastError)

	attempts, err := client.JobAttempts(ctx, job.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, a := range attempts {
		fmt.Printf("attempt %d by %s: %s\n", a.Attempt, a.Owner, a.Outcome)
	}

	// Output:
	// job: stuck, lease expiries 1, handler errors 0
	// job: completed (provider shows the charge captured)
	// attempt 1 by crashed-worker: lease_expired
}
