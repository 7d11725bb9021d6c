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

	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
)

// paused returns the database's queue control state: name -> paused.
func (e *env) paused() map[string]bool {
	e.t.Helper()
	infos, err := e.client.QueueList(context.Background())
	if err != nil {
		e.t.Fatalf("QueueList: %v", err)
	}
	out := map[string]bool{}
	for _, q := range infos {
		if q.Paused != (q.PausedAt != nil) {
			e.t.Errorf("queue %s: paused %v with paused at %v", q.Name, q.Paused, q.PausedAt)
		}
		out[q.Name] = q.Paused
	}
	return out
}

// queueRow returns the overview's table row of a queue, "" when absent.
// The link's escapes are matched in either case: html/template writes them
// in lower case.
func queueRow(body, queue string) string {
	return regexp.MustCompile(`(?is)<tr>\s*<td><a class="mono" href="/jobs\?queue=` + regexp.QuoteMeta(url.QueryEscape(queue)) + `">.*?</tr>`).FindString(body)
}

func TestQueuePauseResume(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		sess := e.session(e.h, "/")
		overview := e.get("/").body
		for _, q := range []string{"default", "payments", "reports"} {
			row := queueRow(overview, q)
			mustContain(t, q+" row", row, `<span class="badge q-active">active</span>`,
				fmt.Sprintf(`<form method="post" action="/queues/%s/pause"`, q), `data-confirm="Pause queue `+q+`?`)
			mustNotContain(t, q+" row", row, "q-paused", "/resume")
		}

		// Pause from the overview: back to the overview with a message.
		res := e.post(e.h, sess, "/queues/default/pause", url.Values{"next": {"/"}})
		if res.code != http.StatusSeeOther {
			t.Fatalf("pause = %d:\n%s", res.code, res.body)
		}
		if loc, want := res.hdr.Get("Location"), "/?done=pause&name=default"; loc != want {
			t.Errorf("pause redirects to %q, want %q", loc, want)
		}
		if got := e.paused(); len(got) != 1 || !got["default"] {
			t.Fatalf("after pause the database has %v, want default paused", got)
		}
		// The pause is real: nothing is claimed from the queue, though it has
		// available jobs.
		rows, err := e.exec.JobClaim(t.Context(), &driver.JobClaimParams{Queue: "default", Max: 10, Owner: testOwner, DefaultLeaseTTL: 60e9})
		if err != nil || len(rows) != 0 {
			t.Errorf("claim from the paused queue: %d rows, %v", len(rows), err)
		}
		page := e.get(res.hdr.Get("Location")).body
		mustContain(t, "overview after pause", page, `<p class="flash" role="status">Queue default is paused: no client claims its jobs until it is resumed.</p>`)
		row := queueRow(page, "default")
		mustContain(t, "paused row", row, `<span class="badge q-paused"`, `action="/queues/default/resume"`, `data-confirm="Resume queue default?`)
		mustNotContain(t, "paused row", row, "/pause", "q-active")
		mustContain(t, "payments row", queueRow(page, "payments"), "q-active", `action="/queues/payments/pause"`)
		// Its jobs are still counted.
		mustContain(t, "paused row", row, `st-available" href="/jobs?queue=default&amp;state=available">2</a>`)
		// Pausing again is harmless.
		if res := e.post(e.h, sess, "/queues/default/pause", nil); res.code != http.StatusSeeOther || res.hdr.Get("Location") != "/?done=pause&name=default" {
			t.Errorf("second pause = %d to %q", res.code, res.hdr.Get("Location"))
		}

		// A queue without jobs, with a "/" in its name, shows once paused.
		const idle = "nightly/reports:v2"
		if strings.Contains(page, idle) {
			t.Fatal("the idle queue shows before it is paused")
		}
		if res := e.post(e.h, sess, "/queues/"+url.PathEscape(idle)+"/pause", url.Values{"next": {"/"}}); res.code != http.StatusSeeOther {
			t.Fatalf("pause %s = %d:\n%s", idle, res.code, res.body)
		}
		page = e.get("/").body
		row = queueRow(page, idle)
		mustContain(t, "idle row", row, `q-paused`, `action="/queues/nightly%2Freports:v2/resume"`)
		if !e.paused()[idle] {
			t.Errorf("%s is not paused in the database", idle)
		}
		// Resume it through the escaped form action, as the browser posts it.
		if res := e.post(e.h, sess, "/queues/nightly%2freports:v2/resume", url.Values{"next": {"/"}}); res.code != http.StatusSeeOther {
			t.Fatalf("resume %s = %d:\n%s", idle, res.code, res.body)
		}
		if got := e.paused(); got[idle] {
			t.Errorf("after resume the database has %v", got)
		}

		// Resume the default queue: active again, and its jobs are claimed.
		res = e.post(e.h, sess, "/queues/default/resume", url.Values{"next": {"/?done=pause&name=default"}})
		if loc, want := res.hdr.Get("Location"), "/?done=resume&name=default"; res.code != http.StatusSeeOther || loc != want {
			t.Fatalf("resume = %d to %q, want %q:\n%s", res.code, loc, want, res.body)
		}
		if got := e.paused(); got["default"] {
			t.Errorf("after resume the database has %v", got)
		}
		page = e.get(res.hdr.Get("Location")).body
		mustContain(t, "overview after resume", page, `<p class="flash" role="status">Queue default is resumed: clients claim its jobs again.</p>`)
		mustContain(t, "resumed row", queueRow(page, "default"), "q-active", `action="/queues/default/pause"`)
		if strings.Contains(page, idle) {
			t.Errorf("the resumed queue without jobs still shows")
		}
		rows, err = e.exec.JobClaim(t.Context(), &driver.JobClaimParams{Queue: "default", Max: 10, Owner: testOwner, DefaultLeaseTTL: 60e9})
		if err != nil || len(rows) != 2 {
			t.Errorf("claim from the resumed queue: %d rows, %v", len(rows), err)
		}

		// The flash names a queue only when its state matches: a crafted
		// link shows nothing.
		for _, q := range []string{"/?done=pause&name=default", "/?done=resume&name=payments", "/?done=pause&name=evil.example%2Fsay-this"} {
			mustNotContain(t, q, e.get(q).body, `class="flash"`)
		}
		// The queue flash stays on the overview; job pages ignore it.
		mustNotContain(t, "job page", e.get(fmt.Sprintf("/jobs/%d?done=pause&name=default", s.available)).body, `class="flash"`)
	})
}

func TestQueueBadRequests(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		sess := e.session(e.h, "/")
		for _, tc := range []struct {
			path string
			code int
		}{
			{"/queues/-default/pause", 400},
			{"/queues/%20default/pause", 400},
			{"/queues/de%20fault/resume", 400},
			{"/queues/a%3Cscript%3E/pause", 400},
			{"/queues/%2Fdefault/pause", 400},
			{"/queues/" + strings.Repeat("q", 129) + "/pause", 400},
			{"/queues/caf%C3%A9/pause", 400},
			{"/queues/default/explode", 404},
			{"/queues/default/pause/now", 404},
		} {
			res := e.post(e.h, sess, tc.path, nil)
			if res.code != tc.code {
				t.Errorf("POST %s = %d, want %d:\n%s", tc.path, res.code, tc.code, res.body)
			}
		}
		// The longest allowed name is accepted.
		long := strings.Repeat("q", 128)
		if res := e.post(e.h, sess, "/queues/"+long+"/pause", nil); res.code != http.StatusSeeOther {
			t.Errorf("pause a 128-byte name = %d:\n%s", res.code, res.body)
		}
		if got := e.paused(); len(got) != 1 || !got[long] {
			t.Errorf("after the bad requests the database has %v", got)
		}
		// State changes are POST only.
		if res := e.get("/queues/default/pause"); res.code == http.StatusSeeOther || res.code == http.StatusOK {
			t.Errorf("GET pause = %d", res.code)
		}
		if e.paused()["default"] {
			t.Error("a GET paused the queue")
		}
	})
}

func TestQueueRefused(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		sess := e.session(e.h, "/")
		other := e.session(e.h, "/")
		for name, tc := range map[string]struct {
			sess *session
			form url.Values
		}{
			"no cookie, no token": {nil, nil},
			"no cookie":           {nil, url.Values{"csrf": {sess.token}}},
			"no token":            {&session{cookie: sess.cookie}, url.Values{"csrf": {""}}},
			"wrong token":         {sess, url.Values{"csrf": {other.token}}},
		} {
			if res := e.post(e.h, tc.sess, "/queues/default/pause", tc.form); res.code != http.StatusForbidden {
				t.Errorf("%s: POST pause = %d, want 403", name, res.code)
			}
		}
		r := httptest.NewRequest(http.MethodPost, "/queues/default/pause", strings.NewReader(url.Values{"csrf": {sess.token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.AddCookie(sess.cookie)
		if res := do(t, e.h, r); res.code != http.StatusForbidden {
			t.Errorf("cross-site POST pause = %d, want 403", res.code)
		}

		// Read-only: no buttons, and a POST is refused.
		ro := e.handler(&dashboard.Options{ReadOnly: true})
		roSess := e.session(ro, "/")
		for _, path := range []string{"/queues/default/pause", "/queues/default/resume"} {
			if res := e.post(ro, roSess, path, nil); res.code != http.StatusForbidden || !strings.Contains(res.body, "read-only") {
				t.Errorf("read-only POST %s = %d:\n%s", path, res.code, res.body)
			}
		}
		if got := e.paused(); len(got) != 0 {
			t.Fatalf("a refused POST changed the queues: %v", got)
		}
		if err := e.client.QueuePause(t.Context(), "payments"); err != nil {
			t.Fatal(err)
		}
		body := do(t, ro, httptest.NewRequest(http.MethodGet, "/", nil)).body
		mustContain(t, "read-only overview", body, "q-paused", "q-active")
		mustNotContain(t, "read-only overview", body, `method="post"`, "/pause", "/resume")
	})
}
