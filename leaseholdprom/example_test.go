package leaseholdprom_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdprom"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// The collector goes in Config.Middleware before the client exists, is
// bound to the client after NewClient, and serves /metrics.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "leaseholdprom")
	defer os.RemoveAll(dir)
	d, db, err := sqlite.Open(filepath.Join(dir, "jobs.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		panic(err)
	}

	metrics := leaseholdprom.New(nil)
	client, err := leasehold.NewClient(d, &leasehold.Config{
		Middleware: []leasehold.Middleware{metrics},
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	metrics.Bind(client)
	// With a mux: mux.Handle("/metrics", metrics.Handler()).
	srv := httptest.NewServer(metrics.Handler())
	defer srv.Close()

	if _, err := client.Insert(ctx, promArgs{Mode: "ok"}, &leasehold.InsertOpts{Queue: "payments"}); err != nil {
		panic(err)
	}
	res, err := srv.Client().Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for line := range strings.Lines(string(body)) {
		if strings.HasPrefix(line, `leasehold_jobs{queue="payments",state="available"}`) ||
			strings.HasPrefix(line, "leasehold_queue_backlog_jobs") ||
			strings.HasPrefix(line, "leasehold_database_up") {
			fmt.Print(line)
		}
	}
	// Output:
	// leasehold_database_up 1
	// leasehold_jobs{queue="payments",state="available"} 1
	// leasehold_queue_backlog_jobs{queue="payments"} 1
}
