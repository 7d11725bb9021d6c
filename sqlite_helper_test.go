package leasehold

import (
	"testing"

	"github.com/leasehold/leasehold/internal/sqlitetest"
	"github.com/leasehold/leasehold/sqlite"
)

// newTestSQLite returns a driver on a fresh, migrated SQLite file in the
// test's temporary directory, closed when the test ends.
func newTestSQLite(t testing.TB) *sqlite.Driver {
	t.Helper()
	d, _ := sqlitetest.Open(t)
	return d
}
