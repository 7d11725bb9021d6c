package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/dburl"
	"github.com/leasehold/leasehold/internal/pgtest"
)

// migrateProcesses is how many `leasehold migrate up` processes race on one
// fresh database, as the replicas of a rolling deploy do.
const migrateProcesses = 8

// TestMigrateUpConcurrentProcesses starts 8 `leasehold migrate up` processes
// at once on a fresh database of each backend: every one exits 0, each
// migration is applied by exactly one of them (the others print "nothing to
// do" or apply nothing more), and the schema is complete afterwards. Postgres
// runs twice: directly on a fresh schema, and through PgBouncer in
// transaction mode with Options.Schema.
func TestMigrateUpConcurrentProcesses(t *testing.T) {
	backends := []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "jobs.db") }},
		{"postgres", func(t *testing.T) string { return pgtest.SchemaURL(t, "lhmig_", "pool_max_conns=4") }},
		{"mysql", freshMySQLURL},
		// Through PgBouncer in transaction mode, with the URL a user would
		// write (README "Behind PgBouncer"): the advisory lock is
		// transaction-scoped, so the pooler cannot hand it to another client.
		{"pgbouncer", func(t *testing.T) string {
			schema := pgtest.Schema(t, "lhmigb_")
			b := pgtest.PgBouncer(t, &pgtest.BouncerOptions{PoolSize: 4})
			return b.URL + "&default_query_exec_mode=exec&listen=off&schema=" + schema
		}},
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			t.Parallel()
			url := bk.url(t)
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()

			type run struct {
				out, errOut string
				err         error
			}
			runs := make([]run, migrateProcesses)
			var wg sync.WaitGroup
			for i := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cmd := exec.CommandContext(ctx, os.Args[0], "migrate", "up", "--database-url", url)
					cmd.Env = append(os.Environ(), runMainEnv+"=1")
					var out, errOut bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &errOut
					err := cmd.Run()
					runs[i] = run{out: out.String(), errOut: errOut.String(), err: err}
				}()
			}
			wg.Wait()

			applied := regexp.MustCompile(`(?m)^applied migration (\d+)$`)
			var versions []int
			nothing := 0
			for i, r := range runs {
				if r.err != nil {
					t.Errorf("process %d: %v\nstdout:\n%s\nstderr:\n%s", i, r.err, r.out, r.errOut)
					continue
				}
				for _, m := range applied.FindAllStringSubmatch(r.out, -1) {
					v, _ := strconv.Atoi(m[1])
					versions = append(versions, v)
				}
				if strings.Contains(r.out, "nothing to do") {
					nothing++
				}
			}
			if t.Failed() {
				return
			}

			db, err := dburl.Open(t.Context(), url)
			if err != nil {
				t.Fatalf("open %s: %v", url, err)
			}
			defer db.Close()
			var d interface {
				Migrations() []driver.Migration
				driver.MigrationStateReader
			}
			switch {
			case db.SQLite != nil:
				d = db.SQLite
			case db.MySQL != nil:
				d = db.MySQL
			default:
				d = db.Postgres
			}
			var all []int
			for _, m := range d.Migrations() {
				all = append(all, m.Version)
			}
			slices.Sort(versions)
			if !slices.Equal(versions, all) {
				t.Errorf("the processes applied %v between them, want each of %v exactly once", versions, all)
			}
			if nothing == 0 {
				t.Errorf("no process printed \"nothing to do\"; outputs: %+v", runs)
			}
			st, err := d.MigrationState(t.Context())
			if err != nil {
				t.Fatalf("MigrationState: %v", err)
			}
			var recorded []int
			for _, a := range st.Applied {
				recorded = append(recorded, a.Version)
			}
			if !st.Recorded || !st.JobTable || !slices.Equal(recorded, all) {
				t.Errorf("after the race: recorded %v (bookkeeping %v, job table %v), want %v", recorded, st.Recorded, st.JobTable, all)
			}
		})
	}
}

// freshMySQLURL creates a database on the test MySQL/MariaDB
// (LEASEHOLD_TEST_MYSQL_URL, a go-sql-driver DSN, default
// root@tcp(127.0.0.1:3306)/test), drops it when the test ends, and returns its
// mysql:// URL. It fails the test, never skips it, when the server cannot be
// reached.
func freshMySQLURL(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("LEASEHOLD_TEST_MYSQL_URL")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse LEASEHOLD_TEST_MYSQL_URL: %v", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("open the test MySQL: %v", err)
	}
	t.Cleanup(func() { admin.Close() })
	suffix := make([]byte, 6)
	rand.Read(suffix)
	name := "lhmig_" + hex.EncodeToString(suffix)
	if _, err := admin.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s on the test MySQL/MariaDB at %s (set LEASEHOLD_TEST_MYSQL_URL to change it): %v", name, cfg.Addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+name); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	userinfo := cfg.User
	if cfg.Passwd != "" {
		userinfo += ":" + cfg.Passwd
	}
	return fmt.Sprintf("mysql://%s@%s/%s", userinfo, cfg.Addr, name)
}
