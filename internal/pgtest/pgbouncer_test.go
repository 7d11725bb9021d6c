package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestPgBouncer: the private PgBouncer answers for the test database in
// transaction mode, through the simple protocol (the one mode that needs
// nothing of the pooler).
func TestPgBouncer(t *testing.T) {
	b := PgBouncer(t, nil)
	if !versionAtLeast(b.Version, 1, 0) {
		t.Fatalf("version %q", b.Version)
	}
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(b.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect through PgBouncer at %s: %v", b.URL, err)
	}
	defer conn.Close(ctx)
	var db string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	// PgBouncer hands out its own process IDs: the session's ID is not the
	// server backend's. The postgres driver's pooler detection relies on it.
	var backend uint32
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		t.Fatal(err)
	}
	if backend == conn.PgConn().PID() {
		t.Fatalf("PgBouncer reported the server's backend PID %d as its own", backend)
	}
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{{"1.18.0", false}, {"1.21.0", true}, {"1.22.1", true}, {"2.0.0", true}, {"bad", false}} {
		if got := versionAtLeast(tc.v, 1, 21); got != tc.want {
			t.Errorf("versionAtLeast(%q, 1, 21) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
