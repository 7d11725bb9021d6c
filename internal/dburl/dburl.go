// Package dburl turns a database URL into an open leasehold backend, for the
// leasehold command and its subcommands. Accepted forms:
//
//	sqlite:leasehold.db            a file, relative to the working directory
//	sqlite:///var/lib/app/jobs.db  an absolute path
//	postgres://user:pass@host:5432/db?sslmode=disable  (or postgresql://)
//	mysql://user:pass@host:3306/db  MySQL 8 or MariaDB 10.6+ (or mariadb://)
//
// Postgres URL parameters that pgx does not know itself are sent to the
// server as run-time parameters, except three that leasehold consumes
// (postgres.Options):
//
//	schema=jobs        the leasehold tables are in schema jobs (it must
//	                   exist); no startup parameter is sent, so it works
//	                   through PgBouncer, which refuses search_path
//	listen_url=URL     LISTEN on this (percent-encoded) URL instead, e.g. a
//	                   direct connection when the URL goes through PgBouncer
//	listen=off         no LISTEN: clients find other clients' jobs by polling
//
// ?search_path=jobs also selects a schema on a direct connection.
// pool_max_conns sizes the pool. Through PgBouncer in transaction mode
// (before 1.21, or without max_prepared_statements) add
// default_query_exec_mode=exec.
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
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/jackc/pgx/v5/pgconn"
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
	// pgURL is a Postgres URL without the parameters leasehold consumes, and
	// pgOpts what they set.
	pgURL  string
	pgOpts postgres.Options
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
		pgURL, opts, err := postgresParams(raw)
		if err == nil {
			_, err = pgxpool.ParseConfig(pgURL)
		}
		if err == nil && opts.ListenURL != "" {
			if _, lerr := pgxpool.ParseConfig(opts.ListenURL); lerr != nil {
				err = fmt.Errorf("listen_url: %w", lerr)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrBadURL, redact(raw), firstLine(err.Error()))
		}
		return &URL{Backend: Postgres, raw: raw, pgURL: pgURL, pgOpts: opts}, nil
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
			return nil, fmt.Errorf("dburl: cannot open SQLite database %s: %s", u.Path, sqliteOpenReason(u.Path, err))
		}
		return &DB{URL: u, SQLite: d, SQLiteDB: db}, nil
	case MySQL:
		d, db, err := mysql.Open(u.dsn)
		if err != nil {
			var me *mysqldriver.MySQLError
			if errors.As(err, &me) && me.Number == 1049 { // ER_BAD_DB_ERROR
				return nil, fmt.Errorf("dburl: MySQL at %s has no database %s (create it with: CREATE DATABASE `%s`)", u, mysqlDBName(u.dsn), mysqlDBName(u.dsn))
			}
			return nil, fmt.Errorf("dburl: cannot reach MySQL at %s: %s", u, firstLine(unwrapAll(err).Error()))
		}
		db.SetMaxOpenConns(u.maxConns)
		return &DB{URL: u, MySQL: d, MySQLDB: db}, nil
	default:
		cfg, err := pgxpool.ParseConfig(u.pgURL)
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
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "3D000" { // invalid_catalog_name
			return nil, fmt.Errorf("dburl: Postgres at %s has no database %s (create it with: createdb -h %s -p %d -U %s %s, or CREATE DATABASE %s)",
				u, cfg.ConnConfig.Database, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.User, cfg.ConnConfig.Database, cfg.ConnConfig.Database)
		}
		if err != nil {
			return nil, fmt.Errorf("dburl: cannot reach Postgres at %s: %s", u, firstLine(err.Error()))
		}
		d, err := postgres.NewWithOptions(pool, &u.pgOpts)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("%w: %s: %s", ErrBadURL, u, firstLine(err.Error()))
		}
		return &DB{URL: u, Postgres: d}, nil
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

// postgresParams takes the parameters leasehold consumes (schema,
// listen_url, listen) out of a Postgres URL, leaving the others as written,
// and returns the URL pgx is to parse and the driver options they set. It
// works on the query string alone, so multi-host URLs keep their form.
func postgresParams(raw string) (string, postgres.Options, error) {
	var opts postgres.Options
	base, query, ok := strings.Cut(raw, "?")
	if !ok {
		return raw, opts, nil
	}
	var kept []string
	for _, pair := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return "", opts, fmt.Errorf("parameter %q: %w", k, err)
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return "", opts, fmt.Errorf("parameter %s: %w", key, err)
		}
		switch key {
		case "schema":
			opts.Schema = val
		case "listen_url":
			opts.ListenURL = val
		case "listen":
			switch val {
			case "on":
			case "off":
				opts.DisableListen = true
			default:
				return "", opts, fmt.Errorf("listen=%q: want on or off", val)
			}
		default:
			if pair != "" {
				kept = append(kept, pair)
			}
		}
	}
	if opts.DisableListen && opts.ListenURL != "" {
		return "", opts, errors.New("listen=off and listen_url both set: choose one")
	}
	if len(kept) == 0 {
		return base, opts, nil
	}
	return base + "?" + strings.Join(kept, "&"), opts, nil
}

// redact hides the password of a URL-shaped string.
//
// It hides the user:password@ part and every query parameter whose name
// holds "password", "passwd" or "secret" (?password=, ?sslpassword=); a
// listen_url parameter, a URL of its own, is redacted the same way. Text
// that does not parse as a URL (a key=value DSN) has its password=... and
// user:password@ parts replaced.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return redactText(raw)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, kv := range parts {
			k, v, _ := strings.Cut(kv, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			switch {
			case secretName(name):
				parts[i] = k + "=xxxxx"
			case name == "listen_url":
				// A URL of its own, password and all.
				if inner, err := url.QueryUnescape(v); err == nil {
					parts[i] = k + "=" + url.QueryEscape(redact(inner))
				} else {
					parts[i] = k + "=xxxxx"
				}
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return u.String()
}

// secretName reports whether a parameter's name says it holds a secret.
func secretName(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "passwd") || strings.Contains(n, "secret")
}

var (
	// kvPassword is a password=... pair of a key=value DSN, quoted or not.
	kvPassword = regexp.MustCompile(`(?i)(\b\w*(?:password|passwd|secret)\w*\s*=\s*)('(?:[^'\\]|\\.)*'|"[^"]*"|[^\s&]+)`)
	// userPassword is the user:password@ of a URL-shaped text.
	userPassword = regexp.MustCompile(`(://[^/:@\s]*:)[^@/\s]*@`)
)

// redactText hides the secrets of a text that is not a URL.
func redactText(s string) string {
	s = kvPassword.ReplaceAllString(s, "${1}xxxxx")
	return userPassword.ReplaceAllString(s, "${1}xxxxx@")
}

// sqliteOpenReason says why a SQLite file could not be opened when its
// directory is the cause (missing, or not writable: SQLite needs to create
// the file and its journal there), else the driver's first line.
func sqliteOpenReason(path string, err error) string {
	dir := filepath.Dir(path)
	st, serr := os.Stat(dir)
	switch {
	case serr != nil:
		return fmt.Sprintf("its directory %s does not exist (create it first)", dir)
	case !st.IsDir():
		return fmt.Sprintf("%s is not a directory", dir)
	case !writableDir(dir):
		return fmt.Sprintf("its directory %s is not writable by this user (SQLite creates the file and its journal there)", dir)
	}
	return firstLine(unwrapAll(err).Error())
}

// writableDir reports whether this process can create a file in dir.
func writableDir(dir string) bool {
	f, err := os.CreateTemp(dir, ".leasehold-probe-")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

// mysqlDBName is the database a go-sql-driver DSN names.
func mysqlDBName(dsn string) string {
	if cfg, err := mysqldriver.ParseDSN(dsn); err == nil {
		return cfg.DBName
	}
	return "?"
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
