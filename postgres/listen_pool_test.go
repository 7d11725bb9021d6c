package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

type poolArgs struct{}

func (poolArgs) Kind() string { return "pool" }

// TestListenerTakesNoPoolConnection: four started clients on a pool of one
// connection still insert and work jobs: their listeners use connections of
// their own, outside the pool.
func TestListenerTakesNoPoolConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := newTestDriver(t).Pool().Config() // a migrated schema
	cfg.MaxConns = 1
	small, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(small.Close)
	sd := New(small)
	done := make(chan int64, 10)
	var clients []*leasehold.Client[pgx.Tx]
	for range 4 {
		w := leasehold.NewWorkers()
		leasehold.AddWorker(w, leasehold.WorkFunc[poolArgs](func(ctx context.Context, j *leasehold.Job[poolArgs]) error {
			done <- j.ID
			return nil
		}))
		c, err := leasehold.NewClient(sd, &leasehold.Config{Workers: w, PollInterval: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	t.Cleanup(func() {
		for _, c := range clients {
			c.Stop(context.Background()) //nolint:errcheck
		}
	})
	insertCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := clients[0].Insert(insertCtx, poolArgs{}, nil)
	if err != nil {
		t.Fatalf("insert with four listening clients on a one-connection pool: %v", err)
	}
	select {
	case id := <-done:
		if id != res.Job.ID {
			t.Fatalf("ran job %d, want %d", id, res.Job.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("job not worked")
	}
	waitCompleted(t, sd, res.Job.ID)
}

func waitCompleted(t *testing.T, d *Driver, id int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := d.GetExecutor().JobGet(t.Context(), &driver.JobGetParams{ID: id})
		if err == nil && row.State == leasetype.JobStateCompleted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d not completed: %+v, %v", id, row, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
