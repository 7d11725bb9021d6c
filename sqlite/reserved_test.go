package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

type reservedArgs struct{}

func (reservedArgs) Kind() string { return "reserved" }

// TestReservedStartFailsWithoutSpareConnections: a working client whose
// *sql.DB has no connection to spare for its lease machinery fails Start
// with a clear error, within the start context, instead of hanging; once
// one frees it starts, and Stop gives the pinned connections back.
func TestReservedStartFailsWithoutSpareConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newTestDriver(t)
	db := d.DB()
	db.SetMaxOpenConns(2)
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[reservedArgs](func(context.Context, *leasehold.Job[reservedArgs]) error { return nil }))
	c, err := leasehold.NewClient(d, &leasehold.Config{Workers: w})
	if err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = c.Start(startCtx)
	if err == nil || !strings.Contains(err.Error(), "reserve connections for the lease machinery") {
		t.Fatalf("Start with one free connection for two reserved = %v, want the reserve error", err)
	}
	if got := db.Stats().InUse; got != 1 {
		t.Fatalf("%d connections in use after the failed Start, want 1 (the held one)", got)
	}
	held.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start with two free connections: %v", err)
	}
	if got := db.Stats().InUse; got != DefaultReservedConns {
		t.Errorf("%d connections in use while started, want %d pinned", got, DefaultReservedConns)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// A statement being prepared in the background (stmtCache.cached) may
	// hold a connection for a moment.
	deadline := time.Now().Add(5 * time.Second)
	for db.Stats().InUse != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections in use 5 s after Stop, want 0", db.Stats().InUse)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
