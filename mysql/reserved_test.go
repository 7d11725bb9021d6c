package mysql

import (
	"database/sql"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
)

// TestReservedLanesReplaceKilledConnections: the pinned connections are
// taken from the *sql.DB at open and kept (they count against
// SetMaxOpenConns); one the server killed is found dead before it is used
// again and replaced.
func TestReservedLanesReplaceKilledConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	db := d.DB()
	db.SetMaxOpenConns(3)
	r, err := d.OpenReserved(ctx, &driver.OpenReservedParams{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := db.Stats().InUse; got != 2 {
		t.Fatalf("%d connections of the DB in use after OpenReserved(2), want 2", got)
	}

	// Kill every session on the test database but the one asking.
	cfg, err := mysqldriver.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	var dbName string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", dbName)
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) < 2 {
		t.Fatalf("%d sessions on %s, want at least the 2 pinned", len(ids), dbName)
	}
	for _, id := range ids {
		if _, err := admin.ExecContext(ctx, "KILL ?", id); err != nil {
			t.Fatalf("kill session %d: %v", id, err)
		}
	}
	// The lanes were idle for a second: each is checked before use and
	// replaced, and no call fails.
	time.Sleep(1100 * time.Millisecond)
	for i := range 4 {
		if _, err := r.Now(ctx); err != nil {
			t.Fatalf("call %d after the pinned sessions were killed: %v", i, err)
		}
	}
	tx, err := r.Begin(ctx)
	if err != nil {
		t.Fatalf("begin on the lanes: %v", err)
	}
	if _, err := tx.Now(ctx); err != nil {
		t.Fatalf("in the transaction: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	if got := db.Stats().InUse; got != 2 {
		t.Fatalf("%d connections of the DB in use after the lanes were replaced, want 2", got)
	}
}
