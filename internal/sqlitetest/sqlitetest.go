// Package sqlitetest gives tests a fresh, migrated SQLite database each, in
// the test's temporary directory.
package sqlitetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// Open returns a driver on a new SQLite file in t's temporary directory,
// migrated to the latest version, and its database handle, which is closed
// when the test ends.
func Open(t testing.TB) (*sqlite.Driver, *sql.DB) {
	t.Helper()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "leasehold.db"))
	if err != nil {
		t.Fatalf("open SQLite: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrate.New(d).Up(context.Background()); err != nil {
		t.Fatalf("migrate SQLite up: %v", err)
	}
	return d, db
}
