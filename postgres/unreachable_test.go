package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/postgres"
)

type pingArgs struct{}

func (pingArgs) Kind() string { return "ping" }

// TestStartUnreachableDatabase: a client on a database that does not answer
// fails to start with an error that says so; inserts fail the same way.
func TestStartUnreachableDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[pingArgs](func(context.Context, *leasehold.Job[pingArgs]) error { return nil }))
	c, err := leasehold.NewClient(postgres.New(pool), &leasehold.Config{Workers: w})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "reach database") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("Start = %v, want an error naming the unreachable database", err)
	}
	if _, err := c.Insert(ctx, pingArgs{}, nil); err == nil || !strings.Contains(err.Error(), "insert jobs") {
		t.Fatalf("Insert = %v, want an insert error", err)
	}
}
