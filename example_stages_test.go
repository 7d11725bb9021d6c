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

// StagedChargeArgs are the arguments of a staged payment charge.
type StagedChargeArgs struct {
	PaymentID string `json:"payment_id"`
}

// Kind names the job type.
func (StagedChargeArgs) Kind() string { return "charge_staged" }

// StagedChargeState is what the charge carries from stage to stage; each
// checkpoint stores it with the job.
type StagedChargeState struct {
	AuthorizationID string `json:"authorization_id,omitempty"`
	CaptureID       string `json:"capture_id,omitempty"`
}

// ExampleStages runs a charge as three fenced stages. The first attempt
// fails after authorizing (a timeout talking to the ledger); the retry
// resumes at the capture with the authorization the first one recorded,
// and never authorizes twice.
func ExampleStages() {
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

	done := make(chan struct{})
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[StagedChargeArgs](func(ctx context.Context, job *leasehold.Job[StagedChargeArgs]) error {
		stages, err := leasehold.NewStages[StagedChargeState](job.JobRow, "authorize", "capture", "ledger")
		if err != nil {
			return err
		}
		fmt.Printf("attempt %d resumes after %q\n", job.Attempt, job.Stage)
		if err := stages.Do(ctx, "authorize", func(ctx context.Context, s *StagedChargeState) error {
			fmt.Println("  authorize at the PSP")
			s.AuthorizationID = "auth-" + job.Args.PaymentID
			return nil
		}); err != nil {
			return err
		}
		if err := stages.Do(ctx, "capture", func(ctx context.Context, s *StagedChargeState) error {
			if job.Attempt == 1 {
				return errors.New("ledger timeout")
			}
			fmt.Println("  capture", s.AuthorizationID)
			s.CaptureID = "cap-1"
			return nil
		}); err != nil {
			return err
		}
		if err := stages.Do(ctx, "ledger", func(ctx context.Context, s *StagedChargeState) error {
			fmt.Println("  write the ledger for", s.CaptureID)
			return nil
		}); err != nil {
			return err
		}
		close(done)
		return nil
	}))
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Workers:      workers,
		PollInterval: 20 * time.Millisecond,
		Retry:        leasehold.ExponentialBackoff{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, Jitter: -1},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	res, err := client.Insert(ctx, StagedChargeArgs{PaymentID: "pay-7"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		log.Fatal("the charge did not finish")
	}
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	history, err := client.JobStages(ctx, res.Job.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range history {
		fmt.Printf("stage %s by attempt %d\n", s.Stage, s.Attempt)
	}

	// Output:
	// attempt 1 resumes after ""
	//   authorize at the PSP
	// attempt 2 resumes after "authorize"
	//   capture auth-pay-7
	//   write the ledger for cap-1
	// stage authorize by attempt 1
	// stage capture by attempt 2
	// stage ledger by attempt 2
}
