package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/sqlite"
)

// TestOverviewTotals: "All queues" has the grand total, and claimable
// counts neither in a paused queue's row nor in the total.
func TestOverviewTotals(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed() // 7 jobs; default has 2 claimable
		e.insert("email", "other", `{}`, "", nil)
		if err := e.client.QueuePause(t.Context(), "default"); err != nil {
			t.Fatal(err)
		}
		res := e.get("/")
		row := regexp.MustCompile(`(?s)<tr>\s*<td><a class="mono" href="/jobs\?queue=default">default</a></td>.*?</tr>`).FindString(res.body)
		mustContain(t, "paused default row", row, `<td class="num claimable"><span class="zero">0</span> <span class="muted held"`, ">2 held</span>")
		foot := regexp.MustCompile(`(?s)<tfoot>.*?</tfoot>`).FindString(res.body)
		mustContain(t, "All queues row", foot, "All queues",
			`<td class="num claimable" title="claimable in the queues that are not paused">1</td>`, // other's one job
			`<td class="num total">8</td>`)
		// The lag column comes right after the queue, before the state counts.
		head := regexp.MustCompile(`(?s)<thead>.*?</thead>`).FindString(res.body)
		if i, j := strings.Index(head, "Oldest due"), strings.Index(head, ">available<"); i < 0 || j < 0 || i > j {
			t.Errorf("the lag column is not before the state counts:\n%s", head)
		}
	})
}

// TestDiscardedTab: dead jobs have their own page in the navigation, with
// a Retry on each.
func TestDiscardedTab(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		dead := e.insert("charge", "payments", `{}`, "", nil)
		e.claimOne("payments", time.Minute, nil, dead)
		e.finish(dead, leasetype.JobStateDiscarded, leasetype.OutcomeFailed, "card declined: do not retry", nil)

		mustContain(t, "overview nav", e.get("/").body, `<a href="/discarded">Discarded</a>`)
		res := e.get("/discarded")
		if res.code != http.StatusOK {
			t.Fatalf("GET /discarded = %d:\n%s", res.code, res.body)
		}
		mustContain(t, "discarded page", res.body, `<title>Discarded · Leasehold</title>`, `<a href="/discarded" class="active">Discarded</a>`,
			"card declined: do not retry", fmt.Sprintf(`action="/jobs/%d/retry"`, dead))
		if got := ids(res.body); len(got) != 1 || got[0] != fmt.Sprint(dead) {
			t.Errorf("discarded page lists %v, want [%d]", got, dead)
		}
		if got := ids(e.get("/discarded?queue=default").body); len(got) != 0 {
			t.Errorf("discarded page of queue default lists %v", got)
		}
		if res := e.get("/discarded?state=running"); res.code != http.StatusBadRequest {
			t.Errorf("discarded page with a state = %d, want 400", res.code)
		}
		ro := e.handler(&dashboard.Options{ReadOnly: true})
		if r := do(t, ro, httptest.NewRequest(http.MethodGet, "/discarded", nil)); r.code != 200 || strings.Contains(r.body, "/retry\"") {
			t.Errorf("read-only discarded page = %d, offers retry: %v", r.code, strings.Contains(r.body, "/retry\""))
		}
	})
}

// TestSchedulesPausedQueue: a schedule whose jobs go to a paused queue says so.
func TestSchedulesPausedQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	s := e.seed()
	ctx := t.Context()
	row, err := e.exec.PeriodicEnsure(ctx, &driver.PeriodicEnsureParams{Name: "reports.daily", Spec: "@daily", NextRunAt: time.Now().Add(time.Hour).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := e.exec.LeaderAttempt(ctx, &driver.LeaderParams{Name: "periodic", Owner: "test-leader", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.exec.PeriodicAdvance(ctx, &driver.PeriodicAdvanceParams{
		Name: row.Name, From: row.NextRunAt, Next: row.NextRunAt.Add(24 * time.Hour), SlotAt: time.Now().UTC(), LastJobID: s.scheduled,
		LeaderName: "periodic", LeaderToken: leader.Token,
	}); err != nil || !ok {
		t.Fatalf("PeriodicAdvance: %v %v", ok, err)
	}
	body := e.get("/schedules").body
	mustContain(t, "schedules", body, `<a href="/jobs?queue=reports">reports</a></td>`)
	mustNotContain(t, "schedules before the pause", body, `class="badge q-paused"`)
	if err := e.client.QueuePause(ctx, "reports"); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "schedules after the pause", e.get("/schedules").body, `<a href="/jobs?queue=reports">reports</a> <span class="badge q-paused"`)
}

// TestTimes: a time far ahead shows its date, and the attempts table shows
// today's times without the date, leaving the error column room.
func TestTimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	s := e.seed()
	far := time.Now().Add(400 * 24 * time.Hour)
	e.insert("report", "yearly", `{}`, "", &far)
	body := e.get("/jobs?queue=yearly").body
	mustContain(t, "far-future job", body, "on "+far.UTC().Format("2006-01-02"))
	mustNotContain(t, "far-future job", body, "in 400d")
	mustContain(t, "near job", e.get("/jobs?queue=reports").body, ">in 59m ") // s.scheduled, an hour ahead

	body = e.get(fmt.Sprintf("/jobs/%d", s.completed)).body
	if !regexp.MustCompile(`<td class="mono" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ">\d\d:\d\d:\d\dZ</td>`).MatchString(body) {
		t.Errorf("the attempts table does not show today's times short, with the full time in the title")
	}
	mustContain(t, "attempts", body, `<th class="errcol">Error</th>`)
}

// failingSource fails JobList as the client and a backend do together:
// each wraps the error with the same words.
type failingSource struct{ dashboard.Source }

func (failingSource) JobList(context.Context, *leasehold.JobListParams) ([]*leasetype.JobRow, error) {
	return nil, fmt.Errorf("leasehold: list jobs: %w", fmt.Errorf("list jobs: %w", errors.New("no such table: leasehold_job")))
}

func TestErrorOnePrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	h, err := dashboard.New(failingSource{e.client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := do(t, h, httptest.NewRequest(http.MethodGet, "/jobs", nil))
	if res.code != http.StatusInternalServerError {
		t.Fatalf("GET /jobs = %d", res.code)
	}
	mustContain(t, "error page", res.body, "leasehold: list jobs: no such table: leasehold_job")
	mustNotContain(t, "error page", res.body, "list jobs: list jobs")
}

// TestSchemaMissing: on a database without the leasehold schema a page
// says what to run, not a raw "no such table".
func TestSchemaMissing(t *testing.T) {
	t.Parallel()
	d, db, err := sqlite.Open(filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := dashboard.New(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/", "/jobs", "/stuck"} {
		res := do(t, h, httptest.NewRequest(http.MethodGet, path, nil))
		if res.code != http.StatusServiceUnavailable {
			t.Errorf("GET %s without the schema = %d, want 503", path, res.code)
		}
		mustContain(t, "GET "+path, res.body, "leasehold migrate up")
	}
}
