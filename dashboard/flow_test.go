package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestCancelRunning: the running page and the running job's page offer
// Cancel; the POST records the cancellation request in the database, and
// the pages then say "cancellation requested" instead of offering it again.
func TestCancelRunning(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		other := e.insert(chargeKind, "payments", `{"amount":3}`, "", nil)
		e.claimOne("payments", 5*time.Minute, nil, other)
		id, form := fmt.Sprint(s.running), fmt.Sprintf(`action="/jobs/%d/cancel"`, s.running)

		res := e.get("/running")
		mustContain(t, "running page", res.body, form, fmt.Sprintf(`action="/jobs/%d/cancel"`, other), `<th>Cancel</th>`,
			`data-confirm="Cancel running job `+id+`?`, `name="next" value="/running"`)
		mustNotContain(t, "running page", res.body, "cancellation requested</span>")
		res = e.get("/jobs/" + id)
		mustContain(t, "running job page", res.body, form, `data-confirm="Cancel running job `+id+`?`)
		mustNotContain(t, "running job page", res.body, "/discard\"", "/retry\"", "Cancel requested")

		// Cancel from the running page: back to it, with a message.
		sess := e.session(e.h, "/running")
		res = e.post(e.h, sess, "/jobs/"+id+"/cancel", url.Values{"next": {"/running"}})
		if res.code != http.StatusSeeOther {
			t.Fatalf("cancel running = %d:\n%s", res.code, res.body)
		}
		if loc, want := res.hdr.Get("Location"), "/running?done=cancel-requested&job="+id; loc != want {
			t.Errorf("cancel redirects to %q, want %q", loc, want)
		}
		j := e.job(s.running)
		if j.State != leasetype.JobStateRunning || j.CancelRequestedAt == nil {
			t.Fatalf("after the POST the job is %s with CancelRequestedAt %v; want running with the request set", j.State, j.CancelRequestedAt)
		}
		if o := e.job(other); o.CancelRequestedAt != nil {
			t.Errorf("the other running job got a cancellation request too")
		}

		res = e.get("/running?done=cancel-requested&job=" + id)
		mustContain(t, "running page after cancel", res.body,
			fmt.Sprintf("Cancellation of job %d was requested: the worker holding it cancels its handler", s.running),
			`<span class="badge cancel-req" title="asked `+fmtTime(*j.CancelRequestedAt)+`">cancellation requested</span>`,
			fmt.Sprintf(`action="/jobs/%d/cancel"`, other)) // the other job still offers it
		mustNotContain(t, "running page after cancel", res.body, form)

		res = e.get("/jobs?state=running")
		mustContain(t, "jobs page after cancel", res.body, `<span class="badge st-running">running</span> <span class="badge cancel-req" title="cancellation requested `)
		if n := strings.Count(res.body, `class="badge cancel-req"`); n != 1 {
			t.Errorf("jobs page marks %d jobs, want 1", n)
		}
		res = e.get("/jobs/" + id)
		mustContain(t, "job page after cancel", res.body, `<span class="badge st-running">running</span> <span class="badge cancel-req"`,
			"<dt>Cancel requested</dt><dd>"+fmtTime(*j.CancelRequestedAt))
		mustNotContain(t, "job page after cancel", res.body, form)

		// Asking again is harmless: the first request's time is kept.
		res = e.post(e.h, sess, "/jobs/"+id+"/cancel", nil)
		if res.code != http.StatusSeeOther || res.hdr.Get("Location") != "/jobs/"+id+"?done=cancel-requested&job="+id {
			t.Errorf("second cancel = %d to %q", res.code, res.hdr.Get("Location"))
		}
		if again := e.job(s.running); again.CancelRequestedAt == nil || !again.CancelRequestedAt.Equal(*j.CancelRequestedAt) {
			t.Errorf("second cancel moved the request from %v to %v", j.CancelRequestedAt, again.CancelRequestedAt)
		}

		// The worker's attempt then ends: a retryable outcome becomes
		// cancelled, and the page shows it finished.
		e.finish(s.running, leasetype.JobStateRetryable, leasetype.OutcomeFailed, "context canceled", nil)
		if st := e.job(s.running).State; st != leasetype.JobStateCancelled {
			t.Fatalf("after the attempt ended the job is %s, want cancelled", st)
		}
		res = e.get("/jobs/" + id)
		mustContain(t, "cancelled job page", res.body, `<span class="badge st-cancelled">cancelled</span>`, "<dt>Cancel requested</dt>")
		mustNotContain(t, "cancelled job page", res.body, `<span class="badge cancel-req"`, form)
		// A finished job cannot be cancelled: a conflict, not a 500.
		if res = e.post(e.h, sess, "/jobs/"+id+"/cancel", nil); res.code != http.StatusConflict {
			t.Errorf("cancel of a cancelled job = %d", res.code)
		}
	})
}

// TestCancelRunningReadOnly: a read-only dashboard shows the request but no
// button, and refuses the POST.
func TestCancelRunningReadOnly(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		ro := e.handler(&dashboard.Options{ReadOnly: true})
		id := fmt.Sprint(s.running)
		for _, path := range []string{"/running", "/jobs/" + id} {
			res := do(t, ro, httptest.NewRequest(http.MethodGet, path, nil))
			if res.code != http.StatusOK {
				t.Fatalf("GET %s = %d", path, res.code)
			}
			mustNotContain(t, "read-only "+path, res.body, `method="post"`, "/cancel\"")
		}
		sess := e.session(ro, "/running")
		res := e.post(ro, sess, "/jobs/"+id+"/cancel", url.Values{"next": {"/running"}})
		if res.code != http.StatusForbidden || !strings.Contains(res.body, "read-only") {
			t.Errorf("read-only cancel = %d:\n%s", res.code, res.body)
		}
		if j := e.job(s.running); j.CancelRequestedAt != nil || j.State != leasetype.JobStateRunning {
			t.Fatalf("a refused POST changed the job: %s, request %v", j.State, j.CancelRequestedAt)
		}
		// A request made elsewhere (the CLI) shows, without a button.
		if _, err := e.client.JobCancel(context.Background(), s.running); err != nil {
			t.Fatal(err)
		}
		res = do(t, ro, httptest.NewRequest(http.MethodGet, "/running", nil))
		mustContain(t, "read-only running", res.body, "cancellation requested</span>")
		mustNotContain(t, "read-only running", res.body, `method="post"`)
	})
}

func TestSchedules(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		res := e.get("/schedules")
		if res.code != http.StatusOK {
			t.Fatalf("GET /schedules = %d:\n%s", res.code, res.body)
		}
		mustContain(t, "empty schedules", res.body, `<title>Schedules · Leasehold</title>`,
			`<a href="/schedules" class="active">Schedules</a>`, "No periodic schedules.", "0 periodic jobs")
		mustContain(t, "overview nav", e.get("/").body, `<a href="/schedules">Schedules</a>`)

		s := e.seed()
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Second)
		ensure := func(name, spec string, next time.Time) *leasetype.PeriodicSchedule {
			t.Helper()
			row, err := e.exec.PeriodicEnsure(ctx, &driver.PeriodicEnsureParams{Name: name, Spec: spec, NextRunAt: next})
			if err != nil {
				t.Fatalf("PeriodicEnsure %s: %v", name, err)
			}
			return row
		}
		nightly := ensure("reports.nightly", "0 3 * * *", now.Add(time.Hour))
		ensure("cleanup/hourly", "@every 1h0m0s", now.Add(-2*time.Hour)) // overdue: no leader
		gone := ensure("audit:weekly", "@weekly", now.Add(48*time.Hour))

		// A leader enqueued the nightly report's last slot as the completed
		// job, and the audit's as a job since pruned.
		leader, err := e.exec.LeaderAttempt(ctx, &driver.LeaderParams{Name: "periodic", Owner: "test-leader", TTL: time.Minute})
		if err != nil {
			t.Fatalf("LeaderAttempt: %v", err)
		}
		advance := func(row *leasetype.PeriodicSchedule, slot time.Time, jobID int64) {
			t.Helper()
			ok, err := e.exec.PeriodicAdvance(ctx, &driver.PeriodicAdvanceParams{
				Name: row.Name, From: row.NextRunAt, Next: row.NextRunAt.Add(24 * time.Hour), SlotAt: slot, LastJobID: jobID,
				LeaderName: "periodic", LeaderToken: leader.Token,
			})
			if err != nil || !ok {
				t.Fatalf("PeriodicAdvance %s: %v, %v", row.Name, ok, err)
			}
		}
		advance(nightly, now.Add(-10*time.Minute), s.completed)
		advance(gone, now.Add(-time.Hour), 999999)

		res = e.get("/schedules")
		if res.code != http.StatusOK {
			t.Fatalf("GET /schedules = %d:\n%s", res.code, res.body)
		}
		mustContain(t, "schedules", res.body, "3 periodic jobs",
			`<td class="mono">reports.nightly</td>`, `<td class="mono">0 3 * * *</td>`,
			`<td class="mono">cleanup/hourly</td>`, `<td class="mono">@every 1h0m0s</td>`,
			`<td class="mono">audit:weekly</td>`,
			// the last job, linked, with its state; a pruned one is named
			fmt.Sprintf(`<a class="mono" href="/jobs/%d">%d</a> <span class="badge st-completed">completed</span>`, s.completed, s.completed),
			`<span class="mono">999999</span> <span class="muted">pruned</span>`,
			// the last run, with its relative time
			fmtTime(now.Add(-10*time.Minute))+`</span> <span class="muted">10m `,
			`, overdue</span>`,
		)
		// Rows in name order, each next run with its relative time.
		rows := regexp.MustCompile(`(?s)<tr>\s*<td class="mono">([^<]*)</td>.*?</tr>`).FindAllStringSubmatch(res.body, -1)
		var names []string
		for _, r := range rows {
			names = append(names, r[1])
		}
		if got := strings.Join(names, ","); got != "audit:weekly,cleanup/hourly,reports.nightly" {
			t.Fatalf("schedule rows %q", got)
		}
		for i, want := range []*regexp.Regexp{
			regexp.MustCompile(`<span class="muted">in (2d 23h|3d 0h)</span>`), // next run moved a day on: now + 72h
			regexp.MustCompile(`<span class="warn" title="[^"]*">2h [01]m ago, overdue</span>`),
			regexp.MustCompile(`<span class="muted">in (24h 59m|25h 0m)</span>`),
		} {
			if !want.MatchString(rows[i][0]) {
				t.Errorf("row %s lacks %s:\n%s", names[i], want, rows[i][0])
			}
		}
		if strings.Count(res.body, ", overdue</span>") != 1 {
			t.Errorf("more than one schedule shown overdue")
		}

		// Read-only shows the same page; the live refresh gets the fragment.
		ro := e.handler(&dashboard.Options{ReadOnly: true})
		if r := do(t, ro, httptest.NewRequest(http.MethodGet, "/schedules", nil)); r.code != 200 || !strings.Contains(r.body, "reports.nightly") {
			t.Errorf("read-only schedules = %d", r.code)
		}
	})
}

// fmtTime is the dashboard's time format.
func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }
