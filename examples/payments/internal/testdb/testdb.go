// Package testdb gives the payments tests fresh databases: a SQLite file in
// a temp dir, or a fresh Postgres schema per test. A test that needs Postgres
// fails, never skips, when the server cannot be reached.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/postgres"
	"github.com/leasehold/leasehold/sqlite"
)

// DefaultPostgresURL is used when LEASEHOLD_TEST_POSTGRES_URL is not set.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// PostgresURL returns the test server's URL.
func PostgresURL() string {
	if u := os.Getenv("LEASEHOLD_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultPostgresURL
}

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
	url := PostgresURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to the test Postgres at %s (set LEASEHOLD_TEST_POSTGRES_URL to change it): %v", url, err)
	}
	defer admin.Close(context.Background())
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "lh_pay_" + hex.EncodeToString(suffix)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 20
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return postgres.New(pool)
}
