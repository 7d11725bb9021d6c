package dburl

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/postgres"
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

func TestPostgresParams(t *testing.T) {
	for _, c := range []struct {
		raw, pgURL string
		opts       postgres.Options
		bad        string
	}{
		{raw: "postgres://h/db", pgURL: "postgres://h/db"},
		{raw: "postgres://h/db?sslmode=disable&schema=jobs&default_query_exec_mode=exec",
			pgURL: "postgres://h/db?sslmode=disable&default_query_exec_mode=exec", opts: postgres.Options{Schema: "jobs"}},
		{raw: "postgres://h1:6432,h2:6432/db?schema=My%20Jobs&listen_url=postgres%3A%2F%2Fh1%3A5432%2Fdb",
			pgURL: "postgres://h1:6432,h2:6432/db", opts: postgres.Options{Schema: "My Jobs", ListenURL: "postgres://h1:5432/db"}},
		{raw: "postgres://h/db?listen=off", pgURL: "postgres://h/db", opts: postgres.Options{DisableListen: true}},
		{raw: "postgres://h/db?listen=maybe", bad: "want on or off"},
		{raw: "postgres://h/db?listen=off&listen_url=postgres://h/db", bad: "choose one"},
	} {
		pgURL, opts, err := postgresParams(c.raw)
		if c.bad != "" {
			if err == nil || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("postgresParams(%q) = %v, want an error containing %q", c.raw, err, c.bad)
			}
			continue
		}
		if err != nil || pgURL != c.pgURL || opts != c.opts {
			t.Errorf("postgresParams(%q) = %q, %+v, %v; want %q, %+v", c.raw, pgURL, opts, err, c.pgURL, c.opts)
		}
	}
	u, err := Parse("postgres://h/db?listen_url=" + url.QueryEscape("postgres://u:secret@h:5432/db"))
	if err != nil {
		t.Fatal(err)
	}
	if s := u.String(); strings.Contains(s, "secret") {
		t.Errorf("String() = %q, want listen_url's password hidden", s)
	}
	if _, err := Parse("postgres://h/db?listen_url=" + url.QueryEscape("postgres://h/db?sslmode=bogus")); err == nil || !strings.Contains(err.Error(), "listen_url") {
		t.Errorf("Parse with a bad listen_url = %v, want an error naming it", err)
	}
}

// TestOpenPostgresSchema: ?schema= reaches the driver and is not sent to the
// server (which would refuse an unknown run-time parameter): migrations put
// the tables in the schema although the connections' search_path does not
// name it.
func TestOpenPostgresSchema(t *testing.T) {
	schema := pgtest.Schema(t, "lh_dburl_")
	sep := "?"
	if strings.Contains(pgtest.URL(), "?") {
		sep = "&"
	}
	db, err := Open(t.Context(), pgtest.URL()+sep+"schema="+schema+"&listen=off")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := migrate.New(db.Postgres).Up(t.Context()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	var n int
	if err := db.Postgres.Pool().QueryRow(t.Context(),
		`SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = 'leasehold_job'`, schema).Scan(&n); err != nil || n != 1 {
		t.Fatalf("leasehold_job in %s: %d, %v; want 1", schema, n, err)
	}
	if db.Postgres.Notifies() {
		t.Fatal("listen=off: the driver still notifies")
	}
}

// TestRedactEverySecret: no form of a password in a database URL or DSN
// survives redaction.
func TestRedactEverySecret(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"postgres://app:s3cr3t-pw@db:5432/app",
		"postgres://app@db:5432/app?password=s3cr3t-pw",
		"postgres://app@db:5432/app?sslmode=require&sslpassword=s3cr3t-pw",
		"postgres://app@db/app?listen_url=" + url.QueryEscape("postgres://app:s3cr3t-pw@direct/app"),
		"mysql://root:s3cr3t-pw@127.0.0.1:3306/test",
		"host=db user=app password=s3cr3t-pw dbname=app",
		"host=db password='s3cr3t-pw' dbname=app",
		"postgres://app:s3cr3t-pw@db:5432/app\x7f", // does not parse as a URL
	} {
		got := redact(raw)
		if strings.Contains(got, "s3cr3t-pw") {
			t.Errorf("redact(%q) = %q: the password is still there", raw, got)
		}
	}
	if got := redact("postgres://app@db:5432/app?sslmode=disable"); got != "postgres://app@db:5432/app?sslmode=disable" {
		t.Errorf("a URL without secrets changed: %q", got)
	}
}

// TestOpenSaysWhatIsMissing: a database that does not exist, or a SQLite
// file whose directory is missing, is named as such with what to do, not
// as "cannot reach".
func TestOpenSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	pg.Path = "/leasehold_no_such_db"
	if _, err := Open(ctx, pg.String()); err == nil || !strings.Contains(err.Error(), "has no database leasehold_no_such_db (create it with: createdb") {
		t.Errorf("Postgres without the database: %v", err)
	}
	if _, err := Open(ctx, "mysql://root@127.0.0.1:3306/leasehold_no_such_db"); err == nil || !strings.Contains(err.Error(), "has no database leasehold_no_such_db (create it with: CREATE DATABASE") {
		t.Errorf("MySQL without the database: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "no", "such", "dir", "jobs.db")
	if _, err := Open(ctx, "sqlite:"+missing); err == nil || !strings.Contains(err.Error(), "does not exist (create it first)") {
		t.Errorf("SQLite in a missing directory: %v", err)
	}
	if got := sqliteOpenReason(filepath.Join(t.TempDir(), "x.db"), errors.New("unable to open database file")); got != "unable to open database file" {
		t.Errorf("with a writable directory the driver's reason stands: %q", got)
	}
}
