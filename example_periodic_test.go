package leasehold_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/cron"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// SettlementReportArgs are the arguments of a periodic report job.
type SettlementReportArgs struct {
	// Slot is the scheduled time the report covers.
	Slot time.Time `json:"slot"`
}

// Kind names the job type.
func (SettlementReportArgs) Kind() string { return "settlement_report" }

// ExamplePeriodicJob runs a job on a schedule, once per slot in the whole
// fleet. Production schedules are usually cron expressions with a time zone,
// e.g. cron.MustParse("CRON_TZ=Europe/Berlin 0 6 * * *"); this one ticks
// every second so the example finishes quickly.
func ExamplePeriodicJob() {
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

	ran := make(chan time.Time, 10)
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[SettlementReportArgs](func(ctx context.Context, job *leasehold.Job[SettlementReportArgs]) error {
		ran <- job.Args.Slot
		return nil
	}))
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: workers,
		PeriodicJobs: []*leasehold.PeriodicJob{{
			Name:     "settlement-report",
			Schedule: cron.Every(time.Second),
			Job: func(slot time.Time) (leasehold.JobArgs, *leasehold.InsertOpts) {
				return SettlementReportArgs{Slot: slot}, nil
			},
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.Stop(ctx)

	slot := <-ran
	fmt.Println("report ran for a whole second:", slot.Equal(slot.Truncate(time.Second)))

	schedules, err := client.PeriodicSchedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	s := schedules[0]
	fmt.Println("schedule:", s.Name, s.Spec)
	fmt.Println("next run after the last:", s.LastRunAt != nil && s.NextRunAt.After(*s.LastRunAt))

	// Output:
	// report ran for a whole second: true
	// schedule: settlement-report @every 1s
	// next run after the last: true
}
