// Package testdb gives the payments tests fresh databases: a SQLite file in
// a temp dir, or a fresh Postgres schema per test. A test that needs Postgres
// fails, never skips, when the server cannot be reached.
package testdb

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"

	"github.com/leasehold/leasehold/postgres"
	"github.com/leasehold/leasehold/sqlite"
)

// PostgresURL returns the test server's URL.
func PostgresURL() string { return pgtest.URL() }

// SQLite returns a driver and database on a new file in a temp dir, closed
// at cleanup. Migrations are not applied.
func SQLite(t testing.TB) (*sqlite.Driver, *sql.DB) {
	t.Helper()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "payments.db"))
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return d, db
}

// Postgres returns a driver on a fresh schema, dropped at cleanup.
// Migrations are not applied.
func Postgres(t testing.TB) *postgres.Driver {
	t.Helper()
	return postgres.New(pgtest.Pool(t, "lh_pay_", 20))
}
