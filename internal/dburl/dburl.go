// Package dburl turns a database URL into an open leasehold backend, for the
// leasehold command and its subcommands. Accepted forms:
//
//	sqlite:leasehold.db            a file, relative to the working directory
//	sqlite:///var/lib/app/jobs.db  an absolute path
//	postgres://user:pass@host:5432/db?sslmode=disable  (or postgresql://)
//	mysql://user:pass@host:3306/db  MySQL 8 or MariaDB 10.6+ (or mariadb://)
//
// Postgres URL parameters that pgx does not know itself are sent to the
// server as run-time parameters: ?search_path=jobs keeps the leasehold
// tables in schema jobs (it must exist). pool_max_conns sizes the pool.
//
// MySQL URL parameters go to github.com/go-sql-driver/mysql as DSN
// parameters (?tls=true, ?timeout=5s), except pool_max_conns, which sizes
// the pool (32 by default); the backend adds the settings it needs (see
// mysql.DSN).
//
// Errors are one line and say what to fix; passwords never appear in them.
package dburl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/mysql"
	"github.com/leasehold/leasehold/postgres"
	"github.com/leasehold/leasehold/sqlite"
)

// Backend names a database backend.
type Backend string

// Backends.
const (
	SQLite   Backend = "sqlite"
	Postgres Backend = "postgres"
	MySQL    Backend = "mysql"
)

// minPoolConns is the least pool size Open gives Postgres when the URL does
// not set pool_max_conns.
const minPoolConns = 32

// ErrBadURL is wrapped by every error about a malformed or unsupported URL.
var ErrBadURL = errors.New("dburl: bad database URL")

// URL is a parsed database URL.
type URL struct {
	// Backend is the database it names.
	Backend Backend
	// Path is the SQLite file; empty for the others.
	Path string
	// dsn is the go-sql-driver/mysql DSN of a MySQL URL, and maxConns its
	// pool size.
	dsn      string
	maxConns int
	// raw is the URL as given.
	raw string
}

// Parse parses a database URL without opening anything.
func Parse(raw string) (*URL, error) {
	raw = strings.TrimSpace(raw)
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("%w: %q has no scheme (want postgres://, postgresql://, mysql:// or sqlite:)", ErrBadURL, raw)
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "sqlite3":
		path := strings.TrimPrefix(rest, "//") // sqlite:///abs/path and sqlite://rel/path
		switch {
		case path == "":
			return nil, fmt.Errorf("%w: %q names no file (example: sqlite:leasehold.db)", ErrBadURL, raw)
		case strings.ContainsRune(path, '?'):
			return nil, fmt.Errorf("%w: %q: SQLite URLs take no parameters; the backend sets its own", ErrBadURL, raw)
		case path == ":memory:" || strings.HasPrefix(path, "file::memory:"):
			return nil, fmt.Errorf("%w: %q: an in-memory SQLite database is not supported (each connection would see its own); use a file", ErrBadURL, raw)
		}
		return &URL{Backend: SQLite, Path: path, raw: raw}, nil
	case "postgres", "postgresql":
		if _, err := pgxpool.ParseConfig(raw); err != nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrBadURL, redact(raw), firstLine(err.Error()))
		}
		return &URL{Backend: Postgres, raw: raw}, nil
	case "mysql", "mariadb":
		dsn, maxConns, err := mysqlDSN(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrBadURL, redact(raw), firstLine(err.Error()))
		}
		return &URL{Backend: MySQL, raw: raw, dsn: dsn, maxConns: maxConns}, nil
	default:
		return nil, fmt.Errorf("%w: unsupported scheme %q in %s (want postgres://, postgresql://, mysql:// or sqlite:)", ErrBadURL, scheme, redact(raw))
	}
}

// String returns the URL with any password replaced by "xxxxx".
func (u *URL) String() string { return redact(u.raw) }

// DB is an open database and its leasehold driver. Exactly one of SQLite,
// Postgres and MySQL is set, per URL.Backend.
type DB struct {
	// URL is the parsed URL.
	URL *URL
	// SQLite is the driver on a SQLite database, and SQLiteDB its database.
	SQLite   *sqlite.Driver
	SQLiteDB *sql.DB
	// Postgres is the driver on a Postgres pool (Postgres.Pool()).
	Postgres *postgres.Driver
	// MySQL is the driver on a MySQL or MariaDB database, and MySQLDB its
	// database.
	MySQL   *mysql.Driver
	MySQLDB *sql.DB
}

// Open parses raw, opens the database and checks it answers within 10 s.
func Open(ctx context.Context, raw string) (*DB, error) {
	u, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	switch u.Backend {
	case SQLite:
		d, db, err := sqlite.Open(u.Path)
		if err != nil {
			return nil, fmt.Errorf("dburl: cannot open SQLite database %s: %s", u.Path, firstLine(unwrapAll(err).Error()))
		}
		return &DB{URL: u, SQLite: d, SQLiteDB: db}, nil
	case MySQL:
		d, db, err := mysql.Open(u.dsn)
		if err != nil {
			return nil, fmt.Errorf("dburl: cannot reach MySQL at %s: %s", u, firstLine(unwrapAll(err).Error()))
		}
		db.SetMaxOpenConns(u.maxConns)
		return &DB{URL: u, MySQL: d, MySQLDB: db}, nil
	default:
		cfg, err := pgxpool.ParseConfig(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrBadURL, u, firstLine(err.Error()))
		}
		if !strings.Contains(raw, "pool_max_conns") && cfg.MaxConns < minPoolConns {
			// pgx sizes pools by CPU count (4 on a 2-core machine), and every
			// leasehold client holds one connection for LISTEN: a few clients
			// in one process would take the whole pool.
			cfg.MaxConns = minPoolConns
		}
		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		pool, err := pgxpool.NewWithConfig(pingCtx, cfg)
		if err == nil {
			err = pool.Ping(pingCtx)
			if err != nil {
				pool.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("dburl: cannot reach Postgres at %s: %s", u, firstLine(err.Error()))
		}
		return &DB{URL: u, Postgres: postgres.New(pool)}, nil
	}
}

// Close closes the database.
func (db *DB) Close() error {
	if db.SQLiteDB != nil {
		return db.SQLiteDB.Close()
	}
	if db.Postgres != nil {
		db.Postgres.Pool().Close()
	}
	if db.MySQLDB != nil {
		return db.MySQLDB.Close()
	}
	return nil
}

// redact hides the password of a URL-shaped string.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// unwrapAll returns the innermost error, to keep messages short.
func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// defaultMySQLConns is the MySQL pool size when the URL does not set
// pool_max_conns: enough for a few clients in one process, well under the
// server's max_connections (151 by default).
const defaultMySQLConns = 32

// mysqlDSN turns mysql://user:pass@host:port/db?params into a
// go-sql-driver/mysql DSN (user:pass@tcp(host:port)/db?params) and the pool
// size. The host defaults to 127.0.0.1 and the port to 3306.
func mysqlDSN(raw string) (string, int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", 0, errors.New("not a URL")
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return "", 0, errors.New("names no database (example: mysql://root@127.0.0.1:3306/app)")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "3306"
	}
	cfg := mysqldriver.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", net.JoinHostPort(host, port), db
	maxConns := defaultMySQLConns
	q := u.Query()
	if v := q.Get("pool_max_conns"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("pool_max_conns=%q: want a positive number", v)
		}
		maxConns = n
		q.Del("pool_max_conns")
	}
	// Let go-sql-driver parse the remaining parameters, so a bad one is
	// reported here rather than on first use.
	dsn := cfg.FormatDSN()
	if len(q) > 0 {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + q.Encode()
	}
	if _, err := mysqldriver.ParseDSN(dsn); err != nil {
		return "", 0, err
	}
	return dsn, maxConns, nil
}
