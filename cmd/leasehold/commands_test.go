package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

func TestMigrate(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		// Before anything: status lists every migration as pending.
		var st []migrate.Status
		if err := json.Unmarshal([]byte(b.ok(t, "migrate", "status", "--json")), &st); err != nil || len(st) < 2 {
			t.Fatalf("migrate status --json: %v, %+v", err, st)
		}
		latest := st[len(st)-1].Version
		for _, m := range st {
			if m.Applied {
				t.Fatalf("fresh database has migration %d applied", m.Version)
			}
		}
		b.fails(t, "run `leasehold migrate up` first", "jobs", "list")

		out := b.ok(t, "migrate", "up", "--to", "1")
		if out != "applied migration 1\n" {
			t.Fatalf("migrate up --to 1 printed %q", out)
		}
		r := b.run(t, "migrate", "status")
		wantAll(t, "migrate status", r.out, "VERSION", "create_tables", "applied", "pending")
		wantAll(t, "migrate status stderr", r.errOut, "pending: run leasehold migrate up")

		wantAll(t, "migrate up", b.ok(t, "migrate", "up"), fmt.Sprintf("applied migration %d", latest))
		if out := b.ok(t, "migrate", "up"); !strings.Contains(out, "nothing to do") {
			t.Fatalf("second migrate up printed %q", out)
		}
		b.ok(t, "jobs", "list") // the tables exist

		out = b.ok(t, "migrate", "down")
		if out != fmt.Sprintf("reverted migration %d\n", latest) {
			t.Fatalf("migrate down printed %q", out)
		}
		b.fails(t, "--to 99: no migration has that version", "migrate", "down", "--to", "99")
		b.fails(t, "--to 99: no migration has that version", "migrate", "up", "--to", "99")
		b.ok(t, "migrate", "down", "--to", "0")
		if err := json.Unmarshal([]byte(b.ok(t, "migrate", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for _, m := range st {
			if m.Applied {
				t.Fatalf("after down --to 0, migration %d is applied", m.Version)
			}
		}
		b.fails(t, "run `leasehold migrate up` first", "jobs", "list")
	})
}

func TestEnqueue(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		out := b.ok(t, "enqueue", "--kind", "charge", "--args", `{"payment_id": 42, "cents": 2500}`, "--queue", "payments",
			"--priority", "2", "--unique-key", "charge-42", "--max-attempts", "5", "--lease-ttl", "2m",
			"--run-at", "2030-01-02T03:04:05Z", "--metadata", `{"requested_by": "ops", "n": 12345678901234567890}`)
		wantAll(t, "enqueue", out, "inserted job 1", "charge", "payments", "scheduled", `"payment_id":42`, `"cents":2500`, "charge-42")
		row := b.job(t, 1)
		if row.Kind != "charge" || row.Queue != "payments" || row.Priority != 2 || row.MaxAttempts != 5 || row.UniqueKey != "charge-42" ||
			row.LeaseTTL != 2*time.Minute || !row.ScheduledAt.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) || row.State != leasetype.JobStateScheduled {
			t.Fatalf("inserted row = %+v", row)
		}
		var args map[string]any
		if err := json.Unmarshal(row.EncodedArgs, &args); err != nil || args["payment_id"] != 42.0 || args["cents"] != 2500.0 {
			t.Fatalf("stored args %s: %v", row.EncodedArgs, err)
		}
		if !strings.Contains(string(row.Metadata), "12345678901234567890") || !strings.Contains(string(row.Metadata), `"requested_by"`) {
			t.Fatalf("stored metadata %s", row.Metadata)
		}

		// The same unique key: nothing inserted, the existing job shown.
		out = b.ok(t, "enqueue", "--kind", "charge", "--args", `{"payment_id": 42}`, "--queue", "payments", "--unique-key", "charge-42")
		wantAll(t, "enqueue duplicate", out, `unique key "charge-42" matched existing job 1 (scheduled): nothing inserted`)
		j := b.enqueue(t, "--kind", "report")
		if j.ID <= 1 || j.Queue != "default" || j.State != leasetype.JobStateAvailable || string(j.Args) != "{}" {
			t.Fatalf("enqueue --kind report = %+v", j)
		}

		for _, c := range []struct {
			want string
			args []string
		}{
			{`--args is not valid JSON`, []string{"--kind", "x", "--args", `{"a":`}},
			{`--args must be a JSON object`, []string{"--kind", "x", "--args", `[1,2]`}},
			{`--metadata is not valid JSON`, []string{"--kind", "x", "--metadata", `nope`}},
			{`--run-at "tomorrow" is not an RFC 3339 time`, []string{"--kind", "x", "--run-at", "tomorrow"}},
			{`--priority 9 is outside 1 to 4`, []string{"--kind", "x", "--priority", "9"}},
			{`--max-attempts 0 is below 1`, []string{"--kind", "x", "--max-attempts", "0"}},
			{`required flag(s) "kind" not set`, nil},
			{`--kind is empty`, []string{"--kind", " "}},
			{`lease TTL`, []string{"--kind", "x", "--lease-ttl", "1ms"}},
		} {
			b.fails(t, c.want, append([]string{"enqueue"}, c.args...)...)
		}
		rows, err := b.exec().JobList(t.Context(), &driver.JobListParams{})
		if err != nil || len(rows) != 2 {
			t.Fatalf("after the refused inserts: %d jobs, %v; want 2", len(rows), err)
		}
	})
}

// TestEnqueueCheckedBeforeDatabase: invalid JSON is refused without opening
// the database, so even a missing one gives the JSON error.
func TestEnqueueCheckedBeforeDatabase(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.db")
	b := &backend{name: "sqlite", url: "sqlite:" + missing}
	b.fails(t, "--args is not valid JSON", "enqueue", "--kind", "x", "--args", "{")
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("enqueue created %s", missing)
	}
	b.fails(t, "SQLite database "+missing+" does not exist", "enqueue", "--kind", "x")
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("enqueue created %s", missing)
	}
}

func TestJobsListAndShow(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		if r := b.run(t, "jobs", "list"); r.err != nil || r.out != "" || !strings.Contains(r.errOut, "no jobs match") {
			t.Fatalf("jobs list on an empty database: %+v", r)
		}
		b.enqueue(t, "--kind", "charge", "--queue", "payments", "--args", `{"p":1}`)                                                                      // 1: will expire and be retried
		b.enqueue(t, "--kind", "charge", "--queue", "hold", "--args", `{"p":2}`)                                                                          // 2: running
		b.enqueue(t, "--kind", "email", "--queue", "payments", "--unique-key", "welcome-7", "--priority", "3", "--key", "cust-9", "--sequence", "cust-9") // 3

		expired := b.crash(t, "payments")
		if expired.ID != 1 || expired.State != leasetype.JobStateAvailable {
			t.Fatalf("crashed job = %+v, want job 1 available again", expired)
		}
		running := b.claim(t, "hold", "host-a:123:w1", time.Hour)

		out := b.ok(t, "jobs", "list")
		wantAll(t, "jobs list", out, "ID", "STATE", "LEASE LEFT", "host-a:123:w1", "running", "email", "charge")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 || !strings.HasPrefix(lines[1], "3 ") || !strings.HasPrefix(lines[3], "1 ") {
			t.Fatalf("jobs list: want a header and jobs 3, 2, 1 newest first:\n%s", out)
		}
		if !strings.Contains(lines[2], "59m") && !strings.Contains(lines[2], "1h0m") {
			t.Fatalf("running job's line lacks its lease time left (about 1h): %q", lines[2])
		}

		var got []*jobJSON
		list := func(args ...string) []int64 {
			t.Helper()
			if err := json.Unmarshal([]byte(b.ok(t, append([]string{"jobs", "list", "--json"}, args...)...)), &got); err != nil {
				t.Fatal(err)
			}
			ids := []int64{}
			for _, j := range got {
				ids = append(ids, j.ID)
			}
			return ids
		}
		for _, c := range []struct {
			args []string
			want string
		}{
			{nil, "[3 2 1]"},
			{[]string{"--state", "running"}, "[2]"},
			{[]string{"--state", "running,available"}, "[3 2 1]"},
			{[]string{"--state", "available", "--state", "scheduled"}, "[3 1]"},
			{[]string{"--queue", "payments"}, "[3 1]"},
			{[]string{"--kind", "charge"}, "[2 1]"},
			{[]string{"--unique-key", "welcome-7"}, "[3]"},
			{[]string{"--key", "cust-9"}, "[3]"},
			{[]string{"--sequence", "cust-9"}, "[3]"},
			{[]string{"--key", "cust-1"}, "[]"},
			{[]string{"--limit", "1"}, "[3]"},
			{[]string{"--limit", "1", "--before-id", "3"}, "[2]"},
			{[]string{"--state", "stuck"}, "[]"},
		} {
			if ids := fmt.Sprint(list(c.args...)); ids != c.want {
				t.Errorf("jobs list %v = %s, want %s", c.args, ids, c.want)
			}
		}
		list("--unique-key", "welcome-7")
		if got[0].Priority != 3 || string(got[0].Args) != "{}" || got[0].UniqueKey != "welcome-7" || got[0].Key != "cust-9" || got[0].Sequence != "cust-9" {
			t.Fatalf("jobs list --json job 3 = %+v", got[0])
		}

		if r := b.run(t, "sequences"); r.err != nil || !strings.Contains(r.errOut, "no blocked sequences") {
			t.Fatalf("sequences with none blocked: %+v", r)
		}
		b.fails(t, `--state "bogus" is not a job state`, "jobs", "list", "--state", "bogus")
		b.fails(t, "--limit 0 is outside 1 to 10000", "jobs", "list", "--limit", "0")
		b.fails(t, `invalid argument "x" for "--before-id"`, "jobs", "list", "--before-id", "x")

		// show: the expired job has one attempt in its history.
		out = b.ok(t, "jobs", "show", "1")
		wantAll(t, "jobs show 1", out, "Kind", "charge", "Lease expiries  1", "Last lease", "crashed-worker",
			"Attempts (1 ended)", "OUTCOME", "lease_expired", `{"p":1}`)
		out = b.ok(t, "jobs", "show", fmt.Sprint(running.ID))
		wantAll(t, "jobs show 2", out, "State           running", "Lease left", "host-a:123:w1", "Attempts (0 ended)", "none yet")
		var shown struct {
			Job      *jobJSON                `json:"job"`
			Attempts []*leasetype.AttemptRow `json:"attempts"`
		}
		if err := json.Unmarshal([]byte(b.ok(t, "jobs", "show", "1", "--json")), &shown); err != nil {
			t.Fatal(err)
		}
		if shown.Job.ID != 1 || len(shown.Attempts) != 1 || shown.Attempts[0].Outcome != leasetype.OutcomeLeaseExpired || shown.Attempts[0].Owner != "crashed-worker" {
			t.Fatalf("jobs show 1 --json = %+v %+v", shown.Job, shown.Attempts)
		}
		b.fails(t, "job 99 not found", "jobs", "show", "99")
		b.fails(t, `job ID "abc" is not a positive integer`, "jobs", "show", "abc")
		b.fails(t, "accepts 1 arg(s)", "jobs", "show")
	})
}

func TestJobActions(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		for i := 0; i < 3; i++ {
			b.enqueue(t, "--kind", "charge")
		}
		b.enqueue(t, "--kind", "charge", "--queue", "hold") // 4
		b.claim(t, "hold", "w1", time.Hour)

		out := b.ok(t, "jobs", "cancel", "1", "2")
		if out != "cancelled job 1: now cancelled\ncancelled job 2: now cancelled\n" {
			t.Fatalf("jobs cancel printed %q", out)
		}
		if s := b.job(t, 2).State; s != leasetype.JobStateCancelled {
			t.Fatalf("job 2 is %s after cancel", s)
		}
		wantAll(t, "jobs retry", b.ok(t, "jobs", "retry", "1"), "retried job 1: now available")
		if s := b.job(t, 1).State; s != leasetype.JobStateAvailable {
			t.Fatalf("job 1 is %s after retry", s)
		}
		wantAll(t, "jobs discard", b.ok(t, "jobs", "discard", "3"), "discarded job 3: now discarded")
		if s := b.job(t, 3).State; s != leasetype.JobStateDiscarded {
			t.Fatalf("job 3 is %s after discard", s)
		}

		// Mixed: each ID reported, the command fails, the good one is done.
		r := b.fails(t, "retry: 2 of 3 jobs failed", "jobs", "retry", "2", "99", "4")
		wantAll(t, "stdout", r.out, "retried job 2: now available")
		wantAll(t, "stderr", r.errOut, "job 99 not found", "cannot retry job 4: it is running (a running job is retried only after its lease ends)")
		if s := b.job(t, 2).State; s != leasetype.JobStateAvailable {
			t.Fatalf("job 2 is %s after retry", s)
		}
		if s := b.job(t, 4).State; s != leasetype.JobStateRunning {
			t.Fatalf("job 4 is %s, want still running", s)
		}
		// A running job gets a cancellation request and stays running
		// until its worker acts on it (see TestJobCancelRunning).
		out = b.ok(t, "jobs", "cancel", "4")
		j4 := b.job(t, 4)
		if j4.State != leasetype.JobStateRunning || j4.CancelRequestedAt == nil {
			t.Fatalf("job 4 after cancel: %s, CancelRequestedAt %v; want running with the request", j4.State, j4.CancelRequestedAt)
		}
		if want := "cancellation requested for job 4 (at " + fmtTime(j4.CancelRequestedAt) + "): still running until its worker cancels the handler; it then ends cancelled\n"; out != want {
			t.Fatalf("jobs cancel 4 printed %q, want %q", out, want)
		}
		wantAll(t, "jobs list", b.ok(t, "jobs", "list", "--state", "running"), "running (cancel requested)", "w1")
		wantAll(t, "jobs show 4", b.ok(t, "jobs", "show", "4"), "Cancel requested  "+fmtTime(j4.CancelRequestedAt)+" (its worker cancels the handler")
		// Mixed, with --json: a row or an error per ID; asking again keeps
		// the first request's time.
		r = b.fails(t, "cancel: 1 of 3 jobs failed", "jobs", "cancel", "4", "3", "1", "--json")
		wantAll(t, "stderr", r.errOut, "cannot cancel job 3: it is discarded (only waiting, stuck or running jobs can be cancelled)")
		var res []*actionResultJSON
		if err := json.Unmarshal([]byte(r.out), &res); err != nil || len(res) != 3 {
			t.Fatalf("jobs cancel --json printed %q: %v", r.out, err)
		}
		if res[0].ID != 4 || res[0].Result != "cancel_requested" || res[0].Job.State != leasetype.JobStateRunning ||
			res[0].Job.CancelRequestedAt == nil || !res[0].Job.CancelRequestedAt.Equal(*j4.CancelRequestedAt) {
			t.Errorf("jobs cancel --json, job 4: %+v %+v", res[0], res[0].Job)
		}
		if res[1].ID != 3 || res[1].Job != nil || !strings.Contains(res[1].Error, "cannot cancel job 3: it is discarded") {
			t.Errorf("jobs cancel --json, job 3: %+v", res[1])
		}
		if res[2].ID != 1 || res[2].Result != "cancelled" || res[2].Job.State != leasetype.JobStateCancelled || res[2].Job.CancelRequestedAt != nil {
			t.Errorf("jobs cancel --json, job 1: %+v %+v", res[2], res[2].Job)
		}
		if s := b.job(t, 1).State; s != leasetype.JobStateCancelled {
			t.Fatalf("job 1 is %s after cancel", s)
		}
		wantAll(t, "jobs retry", b.ok(t, "jobs", "retry", "1"), "retried job 1: now available")
		r = b.fails(t, "discard: 1 of 1 jobs failed", "jobs", "discard", "3")
		wantAll(t, "stderr", r.errOut, "cannot discard job 3: it is discarded (only available, scheduled, retryable or stuck jobs can be discarded)")
		r = b.fails(t, "retry: 1 of 1 jobs failed", "jobs", "retry", "1")
		wantAll(t, "stderr", r.errOut, "cannot retry job 1: it is available (it is waiting to run already)")
		b.fails(t, `job ID "-3" is not a positive integer`, "jobs", "retry", "--", "-3")
		b.fails(t, "give job IDs, or --state", "jobs", "discard")
	})
}

func TestStuck(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		if r := b.run(t, "stuck", "list"); r.err != nil || !strings.Contains(r.errOut, "no stuck jobs") {
			t.Fatalf("stuck list on an empty database: %+v", r)
		}
		for i := 1; i <= 3; i++ {
			b.enqueue(t, "--kind", "charge", "--queue", "payments", "--args", fmt.Sprintf(`{"payment_id":%d}`, i))
			if row := b.crash(t, "payments", "charge"); row.State != leasetype.JobStateStuck {
				t.Fatalf("crashed charge is %s, want stuck", row.State)
			}
		}
		b.enqueue(t, "--kind", "email") // 4: not stuck

		out := b.ok(t, "stuck", "list")
		wantAll(t, "stuck list", out, "stuck", "crashed-worker", "payments")
		if n := strings.Count(out, "\n"); n != 4 {
			t.Fatalf("stuck list: want a header and 3 jobs:\n%s", out)
		}
		var got []*jobJSON
		if err := json.Unmarshal([]byte(b.ok(t, "stuck", "list", "--json")), &got); err != nil || len(got) != 3 {
			t.Fatalf("stuck list --json: %d jobs, %v", len(got), err)
		}

		out = b.ok(t, "stuck", "resolve", "1", "--as", "succeeded", "--note", "PSP shows charge ch_1")
		if out != "resolved job 1 as succeeded: now completed\n" {
			t.Fatalf("stuck resolve printed %q", out)
		}
		if row := b.job(t, 1); row.State != leasetype.JobStateCompleted || row.LastError != "PSP shows charge ch_1" {
			t.Fatalf("job 1 after resolve = %s %q", row.State, row.LastError)
		}
		wantAll(t, "resolve failed", b.ok(t, "stuck", "resolve", "2", "--as", "failed"), "now discarded")
		wantAll(t, "resolve retry", b.ok(t, "stuck", "resolve", "3", "--as", "retry"), "now available")
		if s := b.job(t, 3).State; s != leasetype.JobStateAvailable {
			t.Fatalf("job 3 is %s after resolve --as retry", s)
		}

		b.fails(t, "cannot resolve job 4: it is available (only stuck jobs can be resolved)", "stuck", "resolve", "4", "--as", "retry")
		b.fails(t, "job 99 not found", "stuck", "resolve", "99", "--as", "retry")
		b.fails(t, `--as "maybe" is not a resolution`, "stuck", "resolve", "4", "--as", "maybe")
		b.fails(t, "--as is required", "stuck", "resolve", "4")
	})
}

func TestQueuesAndStats(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		if r := b.run(t, "queues", "list"); r.err != nil || !strings.Contains(r.errOut, "no queues") {
			t.Fatalf("queues list on an empty database: %+v", r)
		}
		wantAll(t, "stats, empty", b.ok(t, "stats"), "no jobs yet", "no attempt ended")
		b.enqueue(t, "--kind", "charge", "--queue", "payments")
		b.enqueue(t, "--kind", "charge", "--queue", "payments")
		b.enqueue(t, "--kind", "charge", "--queue", "payments", "--run-at", "2030-01-01T00:00:00Z")
		b.enqueue(t, "--kind", "email", "--queue", "mail")
		b.crash(t, "mail", "email") // stuck, with a lease_expired attempt

		out := b.ok(t, "queues", "list")
		wantAll(t, "queues list", out, "QUEUE", "AVAILABLE", "STUCK", "BACKLOG", "OLDEST", "STATUS", "active")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[1], "mail ") || !strings.HasPrefix(lines[2], "payments ") {
			t.Fatalf("queues list: want mail then payments:\n%s", out)
		}
		queues := func() map[string]*queueSummary {
			t.Helper()
			var qs []*queueSummary
			if err := json.Unmarshal([]byte(b.ok(t, "queues", "list", "--json")), &qs); err != nil {
				t.Fatal(err)
			}
			m := map[string]*queueSummary{}
			for _, q := range qs {
				m[q.Queue] = q
			}
			return m
		}
		qs := queues()
		p, m := qs["payments"], qs["mail"]
		if p == nil || p.States[leasetype.JobStateAvailable] != 2 || p.States[leasetype.JobStateScheduled] != 1 || p.Total != 3 ||
			p.Backlog != 2 || p.Paused || m == nil || m.States[leasetype.JobStateStuck] != 1 || m.Backlog != 0 {
			t.Fatalf("queues list --json = payments %+v, mail %+v", p, m)
		}

		// Pause and resume, for every client: the control table holds it.
		wantAll(t, "pause", b.ok(t, "queues", "pause", "payments"), "paused queue payments")
		if !queues()["payments"].Paused {
			t.Fatal("payments not paused after queues pause")
		}
		wantAll(t, "queues list", b.ok(t, "queues", "list"), "paused since")
		wantAll(t, "pause again", b.ok(t, "queues", "pause", "payments"), "already paused")
		if rows, err := b.exec().JobClaim(t.Context(), claimParams("payments")); err != nil || len(rows) != 0 {
			t.Fatalf("claim from a paused queue: %d rows, %v", len(rows), err)
		}
		r := b.run(t, "queues", "pause", "later")
		if r.err != nil || !strings.Contains(r.errOut, "queue later has no jobs yet; paused ahead of time") || !queues()["later"].Paused {
			t.Fatalf("pause of a queue without jobs: %+v", r)
		}
		wantAll(t, "resume", b.ok(t, "queues", "resume", "payments"), "resumed queue payments")
		if queues()["payments"].Paused {
			t.Fatal("payments still paused after queues resume")
		}
		b.fails(t, "cannot resume queue payments: it is not paused", "queues", "resume", "payments")
		b.fails(t, "cannot resume queue nosuch: it is not paused", "queues", "resume", "nosuch")
		b.fails(t, "accepts 1 arg(s)", "queues", "pause")

		out = b.ok(t, "stats")
		wantAll(t, "stats", out, "Jobs by queue and state", "payments", "mail", "(all)", "Throughput", "LEASE_EXPIRED", "10m", "60m")
		var rep statsReport
		if err := json.Unmarshal([]byte(b.ok(t, "stats", "--json")), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Queues) != 3 || len(rep.Throughput) != 2 {
			t.Fatalf("stats --json: %d queues, %d throughput rows; want 3 (later is paused) and 2", len(rep.Queues), len(rep.Throughput))
		}
		for _, tr := range rep.Throughput {
			if tr.Queue != "mail" || tr.Outcomes[leasetype.OutcomeLeaseExpired] != 1 {
				t.Fatalf("throughput row %+v, want mail with one lease expiry", tr)
			}
		}
	})
}

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	b := &backend{url: "postgres://u:secret@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"}
	r := b.fails(t, "cannot reach Postgres at", "jobs", "list")
	if strings.Contains(r.err.Error(), "secret") || strings.Contains(r.err.Error(), "\n") {
		t.Fatalf("error %q: want one line without the password", r.err)
	}
	b.url = "mysql://u:secret@127.0.0.1:1/db?timeout=2s"
	r = b.fails(t, "cannot reach MySQL at", "jobs", "list")
	if strings.Contains(r.err.Error(), "secret") || strings.Contains(r.err.Error(), "\n") {
		t.Fatalf("error %q: want one line without the password", r.err)
	}
	b.url = "sqlserver://sa@localhost/db"
	b.fails(t, `unsupported scheme "sqlserver"`, "stats")
}

func TestHelp(t *testing.T) {
	t.Parallel()
	var stdout, stderr syncBuffer
	if err := runTree(t.Context(), &stdout, &stderr, "--help"); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, c := range []string{"migrate", "enqueue", "jobs", "stuck", "queues", "periodic", "stats", "serve", "demo", "version"} {
		if !strings.Contains(out, "\n  "+c+" ") {
			t.Fatalf("leasehold --help lacks %s:\n%s", c, out)
		}
	}
	b := &backend{url: "sqlite:unused.db"}
	wantAll(t, "jobs retry --help", b.ok(t, "jobs", "retry", "--help"), "Examples:", "leasehold jobs retry 42 43 44", "non-zero")
	wantAll(t, "jobs cancel --help", b.ok(t, "jobs", "cancel", "--help"), `"cancellation requested"`, "still running when the command",
		"ErrJobCancelled", "--json", `"cancel_requested"`)
	wantAll(t, "schedules --help", b.ok(t, "schedules", "--help"), "leasehold periodic list", "Aliases:", "periodic, schedules")
}
