package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
)

// TestMigrateGuards: a --to beyond the known versions is one error with
// nothing printed before it; down refuses to drop the job table while it
// holds jobs unless --yes is given, and says how many would go.
func TestMigrateGuards(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		for _, args := range [][]string{{"migrate", "up", "--to", "99"}, {"migrate", "down", "--to", "99"}, {"migrate", "up", "--to", "-1"}} {
			r := b.fails(t, "--to", args...)
			if r.out != "" {
				t.Errorf("leasehold %v printed %q before its error %v", args, r.out, r.err)
			}
		}
		b.fails(t, "--to 99: no migration has that version (this binary knows 1 to", "migrate", "up", "--to", "99")

		migrated(t, b)
		var st []migrate.Status
		if err := json.Unmarshal([]byte(b.ok(t, "migrate", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		latest := st[len(st)-1].Version
		wantAll(t, "migrate status", b.ok(t, "migrate", "status"), "COMPATIBLE")
		b.enqueue(t, "--kind", "report")
		b.enqueue(t, "--kind", "report")

		r := b.fails(t, "refusing to drop leasehold_job with 2 jobs: pass --yes", "migrate", "down", "--to", "0")
		if r.out != "" {
			t.Errorf("refused down printed %q", r.out)
		}
		if got := b.ok(t, "jobs", "list"); got == "" {
			t.Errorf("jobs list empty after a refused down")
		}
		// Down to 1 keeps the job table: no --yes needed.
		want := ""
		for v := latest; v > 1; v-- {
			want += fmt.Sprintf("reverted migration %d\n", v)
		}
		if out := b.ok(t, "migrate", "down", "--to", "1"); out != want {
			t.Fatalf("migrate down --to 1 printed %q, want %q", out, want)
		}
		b.fails(t, "refusing to drop leasehold_job with 2 jobs: pass --yes", "migrate", "down")
		if out := b.ok(t, "migrate", "down", "--yes"); out != "reverted migration 1\n" {
			t.Fatalf("migrate down --yes printed %q", out)
		}
		// Nothing left to drop: no jobs to count, no --yes needed.
		migrated(t, b)
		b.ok(t, "migrate", "down", "--to", "0")
	})
}

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 1234: "1,234", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestMigrateStatusLockHolder: while a migration holds the lock, migrate
// status on Postgres and MySQL says who holds it; once released, nothing.
func TestMigrateStatusLockHolder(t *testing.T) {
	for _, bk := range []struct {
		name string
		new  func(t *testing.T) *backend
	}{
		{"postgres", newPostgresBackend},
		{"mysql", func(t *testing.T) *backend { return openBackend(t, "mysql", freshMySQLURL(t)) }},
	} {
		t.Run(bk.name, func(t *testing.T) {
			t.Parallel()
			b := migrated(t, bk.new(t))
			var locker driver.MigrationLocker = b.db.Postgres
			if b.db.MySQL != nil {
				locker = b.db.MySQL
			}
			held, err := locker.MigrationLock(t.Context(), &driver.MigrationLockParams{})
			if err != nil {
				t.Fatalf("MigrationLock: %v", err)
			}
			r := b.run(t, "migrate", "status")
			if rerr := held.Release(t.Context()); rerr != nil {
				t.Fatalf("Release: %v", rerr)
			}
			if r.err != nil {
				t.Fatalf("migrate status: %v", r.err)
			}
			t.Logf("migrate status while locked, stderr: %s", r.errOut)
			wantAll(t, "migrate status stderr while locked", r.errOut, "a migration is running: the migration lock is held by")
			if r := b.run(t, "migrate", "status"); r.err != nil || strings.Contains(r.errOut, "lock is held") {
				t.Fatalf("migrate status after release: %v, stderr %q", r.err, r.errOut)
			}
		})
	}
}
