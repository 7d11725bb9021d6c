package leasehold

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"
	"time"
)

type registryArgs struct{}

func (registryArgs) Kind() string { return "registry_test" }

// TestRegistryIntervalNegativeDisables: a client started with a negative
// RegistryInterval never appears in the registry; one with the default
// appears with this module's version.
func TestRegistryIntervalNegativeDisables(t *testing.T) {
	t.Parallel()
	d := newTestSQLite(t)
	start := func(interval time.Duration) *Client[*sql.Tx] {
		t.Helper()
		w := NewWorkers()
		AddWorker(w, WorkFunc[registryArgs](func(context.Context, *Job[registryArgs]) error { return nil }))
		c, err := NewClient(d, &Config{Workers: w, RegistryInterval: interval, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Stop(context.Background()) })
		return c
	}
	silent := start(-1)
	loud := start(0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows, err := silent.Clients(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) == 1 {
			if rows[0].Owner != loud.Owner() || rows[0].Version != moduleVersion() || rows[0].Version == "" {
				t.Fatalf("registry = %+v; want only the default client, version %q", rows[0], moduleVersion())
			}
			break
		}
		if len(rows) > 1 || time.Now().After(deadline) {
			t.Fatalf("registry holds %d rows, want the default client's only", len(rows))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
