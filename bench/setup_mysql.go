package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/mysql"
)

// defaultMySQLDSN is used when LEASEHOLD_TEST_MYSQL_URL is unset: the server
// the mysql package's tests use (MariaDB on loopback, root without a
// password).
const defaultMySQLDSN = "root@tcp(127.0.0.1:3306)/test"

// errNoRiverMySQL answers a River engine on -backend mysql.
var errNoRiverMySQL = errors.New("river engines are not measured on -backend mysql: River has no MySQL or MariaDB driver (v0.51.2 ships riverpgxv5, riverdatabasesql for Postgres, and riversqlite)")

// mysqlConfig parses LEASEHOLD_TEST_MYSQL_URL: a go-sql-driver/mysql DSN
// ("root@tcp(127.0.0.1:3306)/test"), as the mysql package's tests read it,
// or a URL ("mysql://root@127.0.0.1:3306/test").
func mysqlConfig() (*mysqldriver.Config, error) {
	dsn := os.Getenv("LEASEHOLD_TEST_MYSQL_URL")
	if dsn == "" {
		dsn = defaultMySQLDSN
	}
	if !strings.HasPrefix(dsn, "mysql://") && !strings.HasPrefix(dsn, "mariadb://") {
		cfg, err := mysqldriver.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("parse LEASEHOLD_TEST_MYSQL_URL %q: %w", dsn, err)
		}
		return cfg, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse LEASEHOLD_TEST_MYSQL_URL %q: %w", dsn, err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg, err := mysqldriver.ParseDSN("tcp(" + host + ")/" + strings.TrimPrefix(u.Path, "/") + "?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("parse LEASEHOLD_TEST_MYSQL_URL %q: %w", dsn, err)
	}
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	return cfg, nil
}

// mysqlSuffixes name the databases of -backend mysql, one per engine:
// leasehold_<prefix>_<suffix>, never the test database other tests share.
var mysqlSuffixes = []string{"raw", "leasehold"}

func mysqlDatabase(prefix, suffix string) string { return "leasehold_" + prefix + "_" + suffix }

// mysqlResets empty a leasehold schema on MySQL (TRUNCATE takes one table).
var mysqlResets = []string{"TRUNCATE TABLE leasehold_job", "TRUNCATE TABLE leasehold_attempt"}

// mysqlAnalyze refreshes InnoDB's statistics of the job table.
const mysqlAnalyze = "ANALYZE TABLE leasehold_job"

// mysqlDB is one engine's database, opened with mysql.Open (its DSN
// settings; database/sql's pool with no cap on open connections, 16 idle).
type mysqlDB struct {
	name string
	dsn  string // the DSN without the counting network, for child processes
	drv  *mysql.Driver
	db   *sql.DB
	// trips counts the packets db's connections write (countedNet).
	trips atomic.Int64
}

// countedNet registers a go-sql-driver network that dials network, as the
// DSN would, through a connection that counts each write in trips: the
// driver writes a command (a statement, COMMIT, a ping) in one packet and
// waits for its answer, so the count is the pool's round trips (a packet
// over 16 MiB, which these runs never send, would count more than once).
// It returns the name to put in the DSN.
func countedNet(network, db string, trips *atomic.Int64) string {
	name := "counted-" + db
	mysqldriver.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, writes: trips}, nil
	})
	return name
}

// countedConn counts its writes.
type countedConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countedConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// mysqlEnv holds one database per engine, migrated.
type mysqlEnv struct {
	raw, leasehold *mysqlDB
	server         string   // "MariaDB 10.11.19-MariaDB-0+deb12u1 at tcp(127.0.0.1:3306)"
	settings       []string // name=value of the server settings that matter here

	children  []*childInserter // of leasehold-xproc, ended at close
	stopWatch func()
	peakMu    sync.Mutex
	peak      map[string]int // connections in use at once, at most, per database
}

func setupMySQL(ctx context.Context, prefix string) (*mysqlEnv, error) {
	cfg, err := mysqlConfig()
	if err != nil {
		return nil, err
	}
	adminCfg := cfg.Clone()
	adminCfg.DBName = ""
	admin, err := sql.Open("mysql", adminCfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Addr, err)
	}
	defer admin.Close()
	env := &mysqlEnv{}
	if err := env.describe(ctx, admin, cfg); err != nil {
		return nil, err
	}
	for _, suffix := range mysqlSuffixes {
		name := mysqlDatabase(prefix, suffix)
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+name+"`"); err != nil {
			env.close()
			return nil, fmt.Errorf("create database %s on %s (LEASEHOLD_TEST_MYSQL_URL; scripts/ensure-mariadb.sh starts one): %w", name, cfg.Addr, err)
		}
		c := cfg.Clone()
		c.DBName = name
		m := &mysqlDB{name: name, dsn: c.FormatDSN()}
		counted := c.Clone()
		counted.Net = countedNet(c.Net, name, &m.trips)
		drv, db, err := mysql.Open(counted.FormatDSN())
		if err != nil {
			env.close()
			return nil, fmt.Errorf("open database %s: %w", name, err)
		}
		m.drv, m.db = drv, db
		if suffix == "raw" {
			env.raw = m
		} else {
			env.leasehold = m
		}
		if _, err := migrate.New(drv).Up(ctx); err != nil {
			env.close()
			return nil, fmt.Errorf("migrate %s: %w", name, err)
		}
	}
	env.watchPools()
	return env, nil
}

// watchPools samples how many connections each pool has in use every
// millisecond until close, keeping the peak: database/sql records none, and
// the pools are not capped.
func (env *mysqlEnv) watchPools() {
	env.peak = map[string]int{}
	done := make(chan struct{})
	stopped := make(chan struct{})
	env.stopWatch = func() {
		close(done)
		<-stopped
	}
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			env.peakMu.Lock()
			for _, m := range []*mysqlDB{env.raw, env.leasehold} {
				env.peak[m.name] = max(env.peak[m.name], m.db.Stats().InUse)
			}
			env.peakMu.Unlock()
		}
	}()
}

// describe reads the server's version and the settings that bear on the
// figures: durability of each commit, the binary log, isolation.
func (env *mysqlEnv) describe(ctx context.Context, db *sql.DB, cfg *mysqldriver.Config) error {
	var version string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return fmt.Errorf("connect to MySQL/MariaDB at %s (LEASEHOLD_TEST_MYSQL_URL; scripts/ensure-mariadb.sh starts one): %w", cfg.Addr, err)
	}
	kind := "MySQL"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		kind = "MariaDB"
	}
	env.server = fmt.Sprintf("%s %s at %s(%s)", kind, version, cfg.Net, cfg.Addr)
	names := []string{"innodb_flush_log_at_trx_commit", "log_bin", "binlog_format", "sync_binlog",
		"tx_isolation", "transaction_isolation", "innodb_buffer_pool_size", "innodb_flush_method", "innodb_doublewrite"}
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('"+strings.Join(names, "','")+"')")
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	defer rows.Close()
	got := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return err
		}
		got[k] = v
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, k := range names {
		if v, ok := got[k]; ok {
			env.settings = append(env.settings, k+"="+v)
		}
	}
	return nil
}

func (env *mysqlEnv) close() {
	for _, c := range env.children {
		c.close() //nolint:errcheck // its inserts were answered or failed the run
	}
	if env.stopWatch != nil {
		env.stopWatch()
	}
	for _, m := range []*mysqlDB{env.raw, env.leasehold} {
		if m != nil {
			m.db.Close()
		}
	}
}

// about is the comment lines a -backend mysql run prints before its results.
func (env *mysqlEnv) about() []string {
	return []string{
		fmt.Sprintf("# %s; databases %s (raw) and %s (leasehold); River has no MySQL or MariaDB driver, so it is not measured here",
			env.server, env.raw.name, env.leasehold.name),
		"# server settings: " + strings.Join(env.settings, " ") + " (the driver's and raw's claim transactions are READ COMMITTED)",
	}
}

// pools reports the most connections each engine had in use at once.
func (env *mysqlEnv) pools() string {
	env.peakMu.Lock()
	defer env.peakMu.Unlock()
	return fmt.Sprintf("# pools: database/sql via mysql.Open, no cap on open connections; most in use at once (sampled every ms): raw %d, leasehold %d",
		env.peak[env.raw.name], env.peak[env.leasehold.name])
}

// mysqlEngine builds the named engine on MySQL/MariaDB. Names:
//
//	raw               the hand-written loop (4 loops, 1,000 per batch)
//	leasehold         our defaults, MaxWorkers sized like the Postgres drain
//	leasehold-default our defaults, 100 workers
//	leasehold-remote  our defaults, 100 workers, with jobs inserted by
//	                  another client of the same driver in this process
//	leasehold-xproc   our defaults, 100 workers, with jobs inserted by a
//	                  child process of this binary with a pool of its own:
//	                  the wake-up rows (migration 6) wake the client
func mysqlEngine(env *mysqlEnv, name string, spec engineSpec, h *hooks) (engine, error) {
	e, err := newMySQLEngine(env, name, spec, h)
	if err != nil {
		return nil, err
	}
	trips := &env.leasehold.trips
	if name == "raw" {
		trips = &env.raw.trips
	}
	return &lockCounted{engine: e, admin: env.leasehold.db, trips: trips, ours: []string{env.raw.name, env.leasehold.name}}, nil
}

func newMySQLEngine(env *mysqlEnv, name string, spec engineSpec, h *hooks) (engine, error) {
	switch name {
	case "raw":
		ins, err := newLeaseholdEngine("raw", env.raw.drv, leasehold.Config{}, newHooks(), dbExec(env.raw.db), nil, "")
		if err != nil {
			return nil, err
		}
		return &rawEngine{ops: mysqlRaw{env.raw.db}, inserter: ins, loops: 4, batch: 1000}, nil
	case "leasehold", "leasehold-default", "leasehold-remote", "leasehold-xproc":
		cfg := leasehold.Config{LeaseTTL: spec.ttl}
		if name == "leasehold" {
			cfg.Queues = map[string]leasehold.QueueConfig{"default": {MaxWorkers: spec.workers}}
		}
		t := newStmtTrace()
		e, err := newLeaseholdEngine(name, tracedMySQL{env.leasehold.drv, t}, cfg, h, dbExec(env.leasehold.db), mysqlResets, mysqlAnalyze)
		if err != nil {
			return nil, err
		}
		e.hold, e.trace, e.remote = spec.hold, t, name == "leasehold-remote"
		if name == "leasehold-xproc" {
			child, err := startInsertChild("mysql " + env.leasehold.dsn)
			if err != nil {
				return nil, err
			}
			env.children = append(env.children, child)
			e.insertVia = child.insert
		}
		return e, nil
	case "river", "river-default", "river-2ms":
		return nil, errNoRiverMySQL
	}
	return nil, fmt.Errorf("unknown engine %q on -backend mysql (raw, leasehold, leasehold-default, leasehold-remote, leasehold-xproc)", name)
}

// dropMySQLDatabases drops the databases of prefix (the smoke test's).
func dropMySQLDatabases(prefix string) error {
	cfg, err := mysqlConfig()
	if err != nil {
		return err
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range mysqlSuffixes {
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+mysqlDatabase(prefix, s)+"`"); err != nil {
			return err
		}
	}
	return nil
}

// dbExecAll runs statements on db in order.
func dbExecAll(ctx context.Context, db *sql.DB, stmts ...string) error {
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%.40s: %w", q, err)
		}
	}
	return nil
}

// serverCounters are the server-wide status counters a -backend mysql
// engine reports per job over its rounds: statements by kind (an UPDATE or
// INSERT joined to JSON_TABLE counts as Com_update_multi or
// Com_insert_select; SET TRANSACTION as Com_set_option), InnoDB's row work
// (rows read and sent, handler calls) and its row-lock waits.
var serverCounters = []string{"Questions", "Com_select", "Com_update", "Com_update_multi", "Com_insert",
	"Com_insert_select", "Com_begin", "Com_commit", "Com_rollback", "Com_set_option",
	"Rows_read", "Rows_sent", "Handler_read_key", "Handler_read_next", "Handler_update", "Handler_write",
	"Innodb_row_lock_waits", "Innodb_row_lock_time"}

// lockCounted wraps an engine to add up the server's status counters
// (serverCounters) and the round trips of the engine's pool between its
// starts and stops. The counters are server-wide: other clients of the
// server count too.
type lockCounted struct {
	engine
	admin *sql.DB
	// trips counts the packets the engine's pool writes, one per statement,
	// transaction command or ping: its round trips.
	trips *atomic.Int64

	// ours are the bench's databases: sessions on others are other users
	// of the server.
	ours []string

	at0       map[string]int64 // the counters at the last start
	trips0    int64
	foreign0  map[int]time.Duration
	sum       map[string]int64 // their increase over the rounds
	roundTrip int64
	foreign   time.Duration // server CPU of other users' sessions over the rounds
	jobs      int64         // the jobs the rounds completed
}

// foreignSessionCPU reads the CPU of each server thread that serves a
// session on a database other than ours, by thread ID: MariaDB's
// PROCESSLIST.TID names it (MySQL has no such column, and nothing is
// read). On a shared server those sessions' CPU counts in the server's, and
// this tells how much.
func foreignSessionCPU(ctx context.Context, db *sql.DB, ours []string) map[int]time.Duration {
	var pid int
	for p := range serverCPUByPID(nil, mysqlServer.procs) {
		pid = p
	}
	rows, err := db.QueryContext(ctx, "SELECT TID FROM information_schema.PROCESSLIST WHERE DB IS NOT NULL AND DB NOT IN (?, ?)", ours[0], ours[1])
	if err != nil || pid == 0 {
		return nil
	}
	defer rows.Close()
	out := map[int]time.Duration{}
	for rows.Next() {
		var tid int
		if rows.Scan(&tid) != nil {
			return nil
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, tid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[tid] = time.Duration(ut+st) * clockTick
	}
	return out
}

// readCounters reads serverCounters.
func readCounters(ctx context.Context, db *sql.DB) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(serverCounters, "','")+"')")
	if err != nil {
		return nil, fmt.Errorf("read status counters: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

func (e *lockCounted) start(ctx context.Context) error {
	var err error
	if e.at0, err = readCounters(ctx, e.admin); err != nil {
		return err
	}
	e.trips0 = e.trips.Load()
	e.foreign0 = foreignSessionCPU(ctx, e.admin, e.ours)
	return e.engine.start(ctx)
}

func (e *lockCounted) stop(ctx context.Context) error {
	done := e.engine.completed()
	err := e.engine.stop(ctx)
	trips := e.trips.Load()
	for tid, t := range foreignSessionCPU(ctx, e.admin, e.ours) {
		if t0, ok := e.foreign0[tid]; ok {
			e.foreign += t - t0
		}
	}
	at1, cerr := readCounters(ctx, e.admin)
	if err == nil {
		err = cerr
	}
	if e.sum == nil {
		e.sum = map[string]int64{}
	}
	for k, v := range at1 {
		e.sum[k] += v - e.at0[k]
	}
	e.roundTrip += trips - e.trips0
	e.jobs += done
	return err
}

// traceReport prints the wrapped engine's statement trace, if any, the
// row-lock waits of its rounds, and its statements and round trips per job.
func (e *lockCounted) traceReport(w io.Writer) {
	if t, ok := e.engine.(interface{ traceReport(io.Writer) }); ok {
		t.traceReport(w)
	}
	fmt.Fprintf(w, "#   %s InnoDB row lock waits %d, %d ms waited in all (server-wide Innodb_row_lock_waits/_time over its rounds)\n",
		e.name(), e.sum["Innodb_row_lock_waits"], e.sum["Innodb_row_lock_time"])
	jobs := float64(max(e.jobs, 1))
	var b strings.Builder
	fmt.Fprintf(&b, "#   %s per job over %d jobs: round trips %.4f (its pool's packets written); server CPU of sessions on other databases %.1f µs (counted in its CPU/job); server-wide",
		e.name(), e.jobs, float64(e.roundTrip)/jobs, float64(e.foreign.Microseconds())/jobs)
	for _, k := range serverCounters[:len(serverCounters)-2] {
		fmt.Fprintf(&b, " %s %.4f", k, float64(e.sum[k])/jobs)
	}
	fmt.Fprintln(w, b.String())
}
