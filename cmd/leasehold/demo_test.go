package main

import (
	"github.com/leasehold/leasehold/internal/pgtest"

	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/leasetype"
)

// runCLI runs the leasehold command in process and returns its stdout.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func smallDemo(dbPath string, extra ...string) []string {
	return append([]string{"demo", "--database-url", "sqlite:" + dbPath, "--payments", "80", "--workers", "2",
		"--seed", "5", "--lease-ttl", "1s", "--crashes", "1", "--pauses", "1", "--timeout", "90s"}, extra...)
}

func TestDemoJSON(t *testing.T) {
	t.Setenv(databaseURLEnv, "")
	out, err := runCLI(t, smallDemo(filepath.Join(t.TempDir(), "demo.db"), "--json")...)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"payments", "settled", "pending", "psp_charges", "double_charges", "lease_expiries",
		"fenced_writes", "reconciled", "crashes", "pauses"} {
		if _, ok := sum[k].(float64); !ok {
			t.Fatalf("summary lacks integer field %q: %s", k, out)
		}
	}
	if sum["payments"] != 80.0 || sum["settled"] != 80.0 || sum["pending"] != 0.0 || sum["double_charges"] != 0.0 || sum["lost"] != 0.0 {
		t.Fatalf("summary = %s", out)
	}
	for _, k := range []string{"crashes", "pauses", "lease_expiries", "fenced_writes", "reconciled"} {
		if sum[k].(float64) < 1 {
			t.Fatalf("%s = %v, want above 0 (the faults happened): %s", k, sum[k], out)
		}
	}
}

func TestDemoTable(t *testing.T) {
	t.Setenv(databaseURLEnv, "")
	out, err := runCLI(t, smallDemo(filepath.Join(t.TempDir(), "demo.db"), "--no-faults")...)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"database: sqlite", "kept after the run", "settled 80/80", "Summary", "double charges", "0  ok", "OK: every payment settled exactly once"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoFailsOnTimeout(t *testing.T) {
	t.Setenv(databaseURLEnv, "")
	// Nothing can settle in a millisecond: the command must fail.
	_, err := runCLI(t, smallDemo(filepath.Join(t.TempDir(), "demo.db"), "--timeout", "1ms")...)
	if err == nil {
		t.Fatalf("demo with a 1 ms timeout succeeded, want an error (non-zero exit)")
	}
}

func TestBadDatabaseURL(t *testing.T) {
	t.Setenv(databaseURLEnv, "")
	_, err := runCLI(t, "demo", "--database-url", "sqlserver://sa@localhost/db")
	if err == nil || !strings.Contains(err.Error(), `unsupported scheme "sqlserver"`) {
		t.Fatalf("demo on sqlserver:// = %v, want an unsupported-scheme error", err)
	}
}

func TestVersion(t *testing.T) {
	out, err := runCLI(t, "version")
	if err != nil || !strings.HasPrefix(out, "leasehold ") {
		t.Fatalf("version = %q, %v", out, err)
	}
}

// TestDemoNeverTouchesAppData: LEASEHOLD_DATABASE_URL names the
// application's database, which the demo ignores; a database given with
// --database-url that holds other jobs or a payments table of another
// shape is refused with one line, and nothing in it changes.
func TestDemoNeverTouchesAppData(t *testing.T) {
	app := migrated(t, newSQLiteBackend(t))
	job := app.enqueue(t, "--kind", "app.email")
	t.Setenv(databaseURLEnv, app.url)

	out, err := runCLI(t, "demo", "--payments", "10", "--workers", "1", "--no-faults", "--timeout", "60s")
	if err != nil {
		t.Fatalf("demo with %s set: %v\n%s", databaseURLEnv, err, out)
	}
	if !strings.Contains(out, databaseURLEnv+" is ignored") {
		t.Errorf("demo did not say it ignored %s:\n%s", databaseURLEnv, out)
	}
	untouched := func() {
		t.Helper()
		if row := app.job(t, job.ID); row.State != leasetype.JobStateAvailable || row.Attempt != 0 {
			t.Fatalf("the application's job is %s after %d attempts, want untouched", row.State, row.Attempt)
		}
	}
	untouched()

	_, err = runCLI(t, "demo", "--database-url", app.url, "--payments", "10", "--workers", "1", "--no-faults")
	if err == nil || !strings.Contains(err.Error(), "holds 1 jobs that are not the demo's (queues default)") {
		t.Fatalf("demo on a database with other jobs: %v, want a refusal", err)
	}
	untouched()

	other := migrated(t, newSQLiteBackend(t))
	if err := other.exec().Exec(t.Context(), `CREATE TABLE payments (id TEXT PRIMARY KEY, amount INTEGER)`); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "demo", "--database-url", other.url, "--payments", "10", "--workers", "1", "--no-faults")
	if err == nil || !strings.Contains(err.Error(), "a payments table of another shape exists") {
		t.Fatalf("demo on a database with another payments table: %v, want a refusal", err)
	}
}

// TestDemoThroughPgBouncer: the demo, faults and all, through PgBouncer in
// transaction mode with the URL as a user writes it plus the one documented
// parameter, default_query_exec_mode=exec. The tables land where the
// database's search_path puts them (here a test's schema, set on
// PgBouncer's server connections; public in a user's database); LISTEN goes
// through the pooler and hears nothing, so the workers poll.
func TestDemoThroughPgBouncer(t *testing.T) {
	t.Setenv(databaseURLEnv, "")
	schema := pgtest.Schema(t, "lhcli_pgb_")
	b := pgtest.PgBouncer(t, &pgtest.BouncerOptions{SearchPath: schema})
	url := b.URL + "&default_query_exec_mode=exec"
	if !strings.HasPrefix(url, "postgres://postgres@127.0.0.1:") || strings.Count(url, "&") != 1 {
		t.Fatalf("URL %s: want the plain user URL plus one parameter", url)
	}
	out, err := runCLI(t, "demo", "--database-url", url, "--json", "--payments", "80", "--workers", "2",
		"--seed", "5", "--lease-ttl", "1s", "--crashes", "1", "--pauses", "1", "--timeout", "120s")
	if err != nil {
		t.Fatalf("demo through PgBouncer (%s): %v\n%s", url, err, out)
	}
	var sum map[string]any
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, out)
	}
	if sum["payments"] != 80.0 || sum["settled"] != 80.0 || sum["pending"] != 0.0 || sum["double_charges"] != 0.0 || sum["lost"] != 0.0 || sum["not_created"] != 0.0 {
		t.Fatalf("summary = %s", out)
	}
}
