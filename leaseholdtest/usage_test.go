package leaseholdtest_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// signUp is application code under test: it creates a user and enqueues
// their welcome email in one transaction.
func signUp(ctx context.Context, client *leasehold.Client[*sql.Tx], tx *sql.Tx, email string) error {
	if _, err := tx.ExecContext(ctx, "INSERT INTO users (email) VALUES (?)", email); err != nil {
		return err
	}
	_, err := client.InsertTx(ctx, tx, emailArgs{To: email}, &leasehold.InsertOpts{Queue: "mail"})
	return err
}

// TestUsage is written as a user would write it: the concrete driver type,
// type arguments inferred, a WorkFunc for the worker.
func TestUsage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrate.New(d).Up(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE users (email TEXT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	client, err := leasehold.NewClient(d, nil)
	if err != nil {
		t.Fatal(err)
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := signUp(ctx, client, tx, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	job := leaseholdtest.RequireInsertedTx(ctx, t, d, tx, emailArgs{}, &leaseholdtest.RequireInsertedOpts{Queue: "mail"})
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	var sentTo string
	worker := leaseholdtest.NewWorker(t, d, nil, leasehold.WorkFunc[emailArgs](func(ctx context.Context, j *leasehold.Job[emailArgs]) error {
		sentTo = j.Args.To
		return nil
	}), nil)
	res := worker.WorkJob(ctx, t, job.JobRow)
	if res.Err != nil || res.Job.State != leasetype.JobStateCompleted || sentTo != "ada@example.com" {
		t.Fatalf("WorkJob: err %v, state %s, sent to %q", res.Err, res.Job.State, sentTo)
	}
}
