package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sync"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// PayoutStepArgs is a step of a payout graph.
type PayoutStepArgs struct {
	Merchant string `json:"merchant,omitempty"`
}

// Kind names the job type.
func (PayoutStepArgs) Kind() string { return "payout_step" }

// ExampleGraph inserts a payout run as one graph: a split step fans out to
// a payout per merchant, and a settlement report fans in after all of
// them. The report runs once, after every payout.
func ExampleGraph() {
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

	var (
		mu   sync.Mutex
		paid int
		done = make(chan struct{})
	)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[PayoutStepArgs](func(ctx context.Context, job *leasehold.Job[PayoutStepArgs]) error {
		_, step, _ := leasehold.GraphNodeOf(job.JobRow)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case job.Args.Merchant != "":
			paid++
		case step == "report":
			fmt.Printf("report after %d payouts\n", paid)
			close(done)
		}
		return nil
	}))
	client, err := leasehold.NewClient(d, &leasehold.Config{Workers: workers})
	if err != nil {
		log.Fatal(err)
	}

	g := leasehold.NewGraph()
	split := g.Add("split", PayoutStepArgs{}, nil)
	var payouts []leasehold.GraphStep
	for _, m := range []string{"acme", "globex", "initech"} {
		payouts = append(payouts, g.Add("payout-"+m, PayoutStepArgs{Merchant: m}, nil, split))
	}
	g.Add("report", PayoutStepArgs{}, nil, payouts...)
	res, err := client.InsertGraph(ctx, g)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d steps, graph %d is its first step's job\n", len(res.IDs), res.GraphID)

	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// 5 steps, graph 1 is its first step's job
	// report after 3 payouts
}
