package leasehold

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// newTestSQLite returns a driver on a fresh, migrated SQLite file in the
// test's temporary directory, closed when the test ends.
func newTestSQLite(t testing.TB) *sqlite.Driver {
	t.Helper()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "leasehold.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := migrate.New(d).Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}
