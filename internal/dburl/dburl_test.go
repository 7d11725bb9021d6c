package dburl

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func parseCases() []struct {
	raw     string
	backend Backend
	path    string
	bad     string // substring of the error; empty when valid
} {
	return []struct {
		raw     string
		backend Backend
		path    string
		bad     string
	}{
		{raw: "sqlite:leasehold.db", backend: SQLite, path: "leasehold.db"},
		{raw: "sqlite:///tmp/x.db", backend: SQLite, path: "/tmp/x.db"},
		{raw: "sqlite://rel/x.db", backend: SQLite, path: "rel/x.db"},
		{raw: "postgres://u:secret@127.0.0.1:5432/db?sslmode=disable", backend: Postgres},
		{raw: "postgresql://127.0.0.1/db", backend: Postgres},
		{raw: "postgres://127.0.0.1/db?sslmode=disable&search_path=jobs&pool_max_conns=4", backend: Postgres},
		{raw: "mysql://root@localhost/db", backend: MySQL},
		{raw: "mysql://u:secret@127.0.0.1:3307/app?tls=skip-verify&pool_max_conns=4", backend: MySQL},
		{raw: "mariadb://root@127.0.0.1/test", backend: MySQL},
		{raw: "mysql://root@127.0.0.1:3306/", bad: "names no database"},
		{raw: "mysql://root@127.0.0.1/db?pool_max_conns=none", bad: "pool_max_conns"},
		{raw: "mysql://root@127.0.0.1/db?readTimeout=soon", bad: "readTimeout"},
		{raw: "oracle://x/y", bad: `unsupported scheme "oracle"`},
		{raw: "leasehold.db", bad: "has no scheme"},
		{raw: "sqlite:", bad: "names no file"},
		{raw: "sqlite::memory:", bad: "in-memory"},
		{raw: "sqlite:x.db?mode=ro", bad: "take no parameters"},
	}
}

func TestParse(t *testing.T) {
	for _, c := range parseCases() {
		u, err := Parse(c.raw)
		if c.bad != "" {
			if err == nil || !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("Parse(%q) = %v, want ErrBadURL containing %q", c.raw, err, c.bad)
			}
			continue
		}
		if err != nil || u.Backend != c.backend || u.Path != c.path {
			t.Errorf("Parse(%q) = %+v, %v; want backend %s path %q", c.raw, u, err, c.backend, c.path)
		}
	}
}

func TestRedact(t *testing.T) {
	u, err := Parse("postgres://u:secret@127.0.0.1:5432/db")
	if err != nil {
		t.Fatal(err)
	}
	if s := u.String(); strings.Contains(s, "secret") || !strings.Contains(s, "u:xxxxx@") {
		t.Fatalf("String() = %q, want the password hidden", s)
	}
}

func TestMySQLDSN(t *testing.T) {
	for _, c := range []struct {
		raw, dsn string
		conns    int
	}{
		{"mysql://root@127.0.0.1:3306/test", "root@tcp(127.0.0.1:3306)/test", 32},
		{"mysql://u:p%40ss@db/app?pool_max_conns=4&tls=true", "u:p@ss@tcp(db:3306)/app?tls=true", 4},
		{"mariadb:///app", "tcp(127.0.0.1:3306)/app", 32},
	} {
		u, err := Parse(c.raw)
		if err != nil {
			t.Fatalf("Parse(%q): %v", c.raw, err)
		}
		if u.dsn != c.dsn || u.maxConns != c.conns {
			t.Errorf("Parse(%q): DSN %q, %d conns; want %q, %d", c.raw, u.dsn, u.maxConns, c.dsn, c.conns)
		}
	}
	u, err := Parse("mysql://u:secret@127.0.0.1/db")
	if err != nil {
		t.Fatal(err)
	}
	if s := u.String(); strings.Contains(s, "secret") {
		t.Errorf("String() = %q, want the password hidden", s)
	}
}

func TestOpenSQLite(t *testing.T) {
	db, err := Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.SQLite == nil || db.Postgres != nil {
		t.Fatalf("Open(sqlite:) = %+v, want a SQLite driver only", db)
	}
}

func TestOpenErrorsAreOneLine(t *testing.T) {
	for _, raw := range []string{
		"sqlite:" + filepath.Join(t.TempDir(), "missing-dir", "x.db"),
		// Port 1 on loopback: nothing listens there.
		"postgres://u:secret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"mysql://u:secret@127.0.0.1:1/db?timeout=2s",
	} {
		_, err := Open(context.Background(), raw)
		if err == nil {
			t.Fatalf("Open(%q) succeeded, want an error", raw)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, "secret") || !strings.Contains(msg, "cannot") {
			t.Fatalf("Open(%q) error %q: want one line, no password, saying it cannot open or reach", raw, msg)
		}
	}
}
