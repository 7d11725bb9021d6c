package leaseholdtest_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/sqlitetest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/postgres"
	"github.com/leasehold/leasehold/sqlite"
)

// backend is one database the helpers are tested on.
type backend[TTx any] struct {
	// new returns a driver on a fresh, migrated database.
	new      func(t *testing.T) driver.Driver[TTx]
	begin    func(ctx context.Context, d driver.Driver[TTx]) (TTx, error)
	commit   func(ctx context.Context, tx TTx) error
	rollback func(ctx context.Context, tx TTx) error
}

// onBoth runs a test on SQLite and on Postgres, as parallel subtests.
func onBoth(t *testing.T, onSQLite func(*testing.T, backend[*sql.Tx]), onPostgres func(*testing.T, backend[pgx.Tx])) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		onSQLite(t, sqliteBackend())
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		onPostgres(t, postgresBackend())
	})
}

func sqliteBackend() backend[*sql.Tx] {
	return backend[*sql.Tx]{
		new: func(t *testing.T) driver.Driver[*sql.Tx] {
			t.Helper()
			d, _ := sqlitetest.Open(t)
			return d
		},
		begin: func(ctx context.Context, d driver.Driver[*sql.Tx]) (*sql.Tx, error) {
			return d.(*sqlite.Driver).DB().BeginTx(ctx, nil)
		},
		commit:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		rollback: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
	}
}

func postgresBackend() backend[pgx.Tx] {
	return backend[pgx.Tx]{
		new: func(t *testing.T) driver.Driver[pgx.Tx] {
			t.Helper()
			d := postgres.New(newSchemaPool(t))
			if _, err := migrate.New(d).Up(context.Background()); err != nil {
				t.Fatalf("migrate up: %v", err)
			}
			return d
		},
		begin: func(ctx context.Context, d driver.Driver[pgx.Tx]) (pgx.Tx, error) {
			return d.(*postgres.Driver).Pool().Begin(ctx)
		},
		commit:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		rollback: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
	}
}

// newSchemaPool returns a pool on a fresh schema, dropped when the test
// ends; it fails the test, never skips it, when the server cannot be reached.
func newSchemaPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return pgtest.Pool(t, "lhtest_", 8)
}

// newInserter returns an insert-only client on d.
func newInserter[TTx any](t *testing.T, d driver.Driver[TTx]) *leasehold.Client[TTx] {
	t.Helper()
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

func insert[TTx any](t *testing.T, c *leasehold.Client[TTx], args leasehold.JobArgs, opts *leasehold.InsertOpts) *leasehold.InsertResult {
	t.Helper()
	res, err := c.Insert(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("Insert %s: %v", args.Kind(), err)
	}
	return res
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// fakeTB records the failures a helper reports instead of failing the test.
type fakeTB struct {
	mu     sync.Mutex
	errors []string
	fatals []string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// requireFatal fails t unless the helper reported exactly one fatal failure
// containing every one of want.
func (f *fakeTB) requireFatal(t *testing.T, want ...string) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.fatals) != 1 || len(f.errors) != 0 {
		t.Fatalf("helper reported fatals %q and errors %q, want exactly one fatal", f.fatals, f.errors)
	}
	for _, w := range want {
		if !strings.Contains(f.fatals[0], w) {
			t.Fatalf("failure message does not contain %q:\n%s", w, f.fatals[0])
		}
	}
	return f.fatals[0]
}

// Job kinds of the tests.

type emailArgs struct {
	To string `json:"to"`
}

func (emailArgs) Kind() string { return "email" }

// emailArgsV2 has the kind of emailArgs and arguments that do not decode
// into it.
type emailArgsV2 struct {
	To int `json:"to"`
}

func (emailArgsV2) Kind() string { return "email" }

type smsArgs struct {
	Number string `json:"number"`
}

func (smsArgs) Kind() string { return "sms" }

type pushArgs struct{}

func (pushArgs) Kind() string { return "push" }
