// Package pgtest gives tests a fresh PostgreSQL schema each, on the server at
// LEASEHOLD_TEST_POSTGRES_URL, so that tests run in parallel on one database.
// A test that needs the server fails, never skips, when it cannot be reached.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is the test server when LEASEHOLD_TEST_POSTGRES_URL is not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL returns the test server's URL.
func URL() string {
	if u := os.Getenv("LEASEHOLD_TEST_POSTGRES_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema creates a schema named prefix plus a random suffix and drops it,
// with everything in it, when the test ends. Register pools on it after
// calling Schema, so that they close before the drop.
func Schema(t testing.TB, prefix string) string {
	t.Helper()
	url := URL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to the test Postgres at %s (set LEASEHOLD_TEST_POSTGRES_URL to change it): %v", url, err)
	}
	defer admin.Close(context.Background())
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := prefix + hex.EncodeToString(suffix)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
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
	return schema
}

// Pool returns a pool of at most maxConns connections on a fresh schema
// (see Schema), closed when the test ends.
func Pool(t testing.TB, prefix string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return NewPool(t, PoolConfig(t, prefix, maxConns))
}

// PoolConfig returns the configuration of a pool of at most maxConns
// connections on a fresh schema (see Schema), selected by search_path, for
// a test to adjust before NewPool.
func PoolConfig(t testing.TB, prefix string, maxConns int32) *pgxpool.Config {
	t.Helper()
	schema := Schema(t, prefix)
	cfg := ParsePoolConfig(t, URL(), maxConns)
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	return cfg
}

// ParsePoolConfig parses url as the configuration of a pool of at most
// maxConns connections.
func ParsePoolConfig(t testing.TB, url string, maxConns int32) *pgxpool.Config {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	cfg.MaxConns = maxConns
	return cfg
}

// NewPool opens a pool with cfg, closed when the test ends.
func NewPool(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// SchemaURL returns the test server's URL with search_path selecting a fresh
// schema (see Schema) and the given extra parameters ("pool_max_conns=4"):
// pgx passes parameters it does not know to the server as run-time settings.
func SchemaURL(t testing.TB, prefix string, params ...string) string {
	t.Helper()
	schema := Schema(t, prefix)
	url := URL()
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + strings.Join(append([]string{"search_path=" + schema}, params...), "&")
}
