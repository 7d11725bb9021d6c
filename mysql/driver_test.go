package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
	"github.com/leasehold/leasehold/migrate"
)

// defaultTestDSN is the test server when LEASEHOLD_TEST_MYSQL_URL is unset:
// MariaDB or MySQL on loopback, user root without a password. The variable
// takes a go-sql-driver/mysql DSN; each test creates its own database on
// that server and drops it at the end.
const defaultTestDSN = "root@tcp(127.0.0.1:3306)/test"

func testDSN() string {
	if u := os.Getenv("LEASEHOLD_TEST_MYSQL_URL"); u != "" {
		return u
	}
	return defaultTestDSN
}

// newTestDB creates a fresh, empty database, dropped when the test ends, and
// returns it opened with Open. It fails the test, never skips it, when the
// server cannot be reached.
func newTestDB(t testing.TB) (*Driver, *sql.DB) {
	t.Helper()
	dsn := testDSN()
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse LEASEHOLD_TEST_MYSQL_URL %q: %v", dsn, err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	defer admin.Close()
	suffix := make([]byte, 6)
	rand.Read(suffix)
	name := "lh_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s on the test MySQL/MariaDB at %s (set LEASEHOLD_TEST_MYSQL_URL to change it; scripts/ensure-mariadb.sh starts one): %v", name, dsn, err)
	}
	cfg.DBName = name
	d, db, err := Open(cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open database %s: %v", name, err)
	}
	// Many tests run at once; keep each one's share of max_connections
	// small. Each working client pins DefaultReservedConns of them for its
	// lease machinery and one for its wake-up listener: the drain runs 8
	// clients.
	db.SetMaxOpenConns(8 + 8*(DefaultReservedConns+1))
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg.DBName = ""
		admin, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			t.Errorf("open to drop database %s: %v", name, err)
			return
		}
		defer admin.Close()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	return d, db
}

// newTestDriver returns a driver on a fresh, migrated database.
func newTestDriver(t testing.TB) *Driver {
	t.Helper()
	d, _ := newTestDB(t)
	if _, err := migrate.New(d).Up(t.Context()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return d
}

// newPeerDriver opens d's database again, with a pool of its own, as
// another process would.
func newPeerDriver(t *testing.T, d *Driver) *Driver {
	t.Helper()
	var name string
	if err := d.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatalf("read database name: %v", err)
	}
	cfg, err := mysqldriver.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	peer, db, err := Open(cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open database %s again: %v", name, err)
	}
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { db.Close() })
	return peer
}

func TestConformance(t *testing.T) {
	drivertest.Exercise(t, drivertest.Backend[*sql.Tx]{
		New: func(t *testing.T) driver.Driver[*sql.Tx] { return newTestDriver(t) },
		BeginTx: func(ctx context.Context, d driver.Driver[*sql.Tx]) (*sql.Tx, error) {
			// As the package documentation advises users.
			return d.(*Driver).DB().BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		},
		CommitTx:   func(_ context.Context, tx *sql.Tx) error { return tx.Commit() },
		RollbackTx: func(_ context.Context, tx *sql.Tx) error { return tx.Rollback() },
		NewSized: func(t *testing.T, conns int) driver.Driver[*sql.Tx] {
			d := newTestDriver(t)
			d.DB().SetMaxOpenConns(conns)
			return d
		},
		NewPeer: func(t *testing.T, d driver.Driver[*sql.Tx]) driver.Driver[*sql.Tx] {
			return newPeerDriver(t, d.(*Driver))
		},
	})
}
