package dashboard_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestAuditTrail: an action posted through the dashboard is recorded with
// the identity that authenticated it, shown on the job's page in
// "Operator actions" and on /audit.
func TestAuditTrail(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		h := e.handler(&dashboard.Options{BearerToken: "s3cret-token-long-enough", BasicAuth: &dashboard.BasicAuth{Username: "ops", Password: "pa55"}})
		basic := func(r *http.Request) { r.SetBasicAuth("ops", "pa55") }
		bearer := func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-token-long-enough") }
		post := func(auth func(*http.Request), path string) {
			t.Helper()
			get := httptest.NewRequest(http.MethodGet, "/", nil)
			auth(get)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, get)
			var cookie *http.Cookie
			for _, c := range w.Result().Cookies() {
				if c.Name == "leasehold_csrf" {
					cookie = c
				}
			}
			r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(url.Values{"csrf": {cookie.Value}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.Header.Set("Origin", "http://example.com")
			r.AddCookie(cookie)
			auth(r)
			if res := do(t, h, r); res.code != http.StatusSeeOther {
				t.Fatalf("POST %s = %d:\n%s", path, res.code, res.body)
			}
		}
		post(basic, fmt.Sprintf("/jobs/%d/cancel", s.available))
		post(bearer, fmt.Sprintf("/jobs/%d/retry", s.available))
		post(bearer, "/queues/default/pause")

		rows, err := e.client.AuditList(t.Context(), nil)
		if err != nil {
			t.Fatalf("AuditList: %v", err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s %s %d", r.Actor, r.Action, r.JobID))
		}
		want := []string{"token pause 0", fmt.Sprintf("token retry %d", s.available), fmt.Sprintf("basic:ops cancel %d", s.available)}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("audit entries = %q, want %q", got, want)
		}

		page := e.get(fmt.Sprintf("/jobs/%d", s.available))
		mustContain(t, "job page", page.body, "Operator actions", "basic:ops", "token", ">retry<", ">cancel<")
		page = e.get(fmt.Sprintf("/jobs/%d", s.completed))
		mustContain(t, "job page of an untouched job", page.body, "No operator has acted on this job.")

		page = e.get("/audit")
		if page.code != http.StatusOK {
			t.Fatalf("GET /audit = %d", page.code)
		}
		mustContain(t, "audit page", page.body, "basic:ops", ">pause<", "/jobs?queue=default")
		page = e.get("/audit?actor=basic:ops")
		mustContain(t, "audit page by actor", page.body, "basic:ops")
		mustNotContain(t, "audit page by actor", page.body, ">pause<")
		if res := e.get("/audit?job=abc"); res.code != http.StatusBadRequest {
			t.Errorf("GET /audit?job=abc = %d, want 400", res.code)
		}
	})
}

// TestBulkActions: the jobs page offers the bulk actions that apply to the
// filtered state with the count; the confirmation counts again; the POST,
// CSRF-checked, changes every matching job and lands on the audit page.
// Read-only dashboards offer and accept none.
func TestBulkActions(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		var ids []int64
		for i := range 3 {
			id := e.insert("charge", "payments", fmt.Sprintf(`{"n":%d}`, i), "", nil)
			if _, _, err := e.exec.JobSetState(t.Context(), &driver.JobSetStateParams{ID: id, FromStates: driver.NotRunningStates(), State: leasetype.JobStateDiscarded}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		other := e.insert("charge", "mail", `{}`, "", nil)
		if _, _, err := e.exec.JobSetState(t.Context(), &driver.JobSetStateParams{ID: other, FromStates: driver.NotRunningStates(), State: leasetype.JobStateDiscarded}); err != nil {
			t.Fatal(err)
		}

		page := e.get("/jobs?state=discarded&queue=payments")
		mustContain(t, "jobs page", page.body, "Retry all 3 matching", "Delete all 3 matching", `action="/bulk"`)
		mustNotContain(t, "jobs page", page.body, "Discard all", "Cancel all")
		mustNotContain(t, "unfiltered jobs page", e.get("/jobs").body, "all 3 matching", "all 4 matching")

		confirm := e.get("/bulk?action=retry&state=discarded&queue=payments")
		if confirm.code != http.StatusOK {
			t.Fatalf("GET /bulk = %d:\n%s", confirm.code, confirm.body)
		}
		mustContain(t, "confirmation", confirm.body, "<b>3</b> discarded jobs match", "Retry 3 jobs", `method="post" action="/bulk"`)
		if res := e.get("/bulk?action=retry&state=running"); res.code != http.StatusBadRequest {
			t.Errorf("GET /bulk for running retry = %d, want 400", res.code)
		}

		form := url.Values{"action": {"retry"}, "state": {"discarded"}, "queue": {"payments"}}
		// Without the CSRF token: refused, nothing changed.
		r := httptest.NewRequest(http.MethodPost, "/bulk", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if res := do(t, e.h, r); res.code != http.StatusForbidden {
			t.Fatalf("POST /bulk without CSRF = %d", res.code)
		}
		if j := e.job(ids[0]); j.State != leasetype.JobStateDiscarded {
			t.Fatalf("job %d is %s after a refused bulk POST", ids[0], j.State)
		}

		sess := e.session(e.h, "/jobs")
		res := e.post(e.h, sess, "/bulk", form)
		if res.code != http.StatusSeeOther || !strings.HasPrefix(res.hdr.Get("Location"), "/audit?") {
			t.Fatalf("POST /bulk = %d to %q:\n%s", res.code, res.hdr.Get("Location"), res.body)
		}
		for _, id := range ids {
			if j := e.job(id); j.State != leasetype.JobStateAvailable {
				t.Errorf("job %d is %s after bulk retry, want available", id, j.State)
			}
		}
		if j := e.job(other); j.State != leasetype.JobStateDiscarded {
			t.Errorf("job of queue mail is %s, want discarded", j.State)
		}
		page = e.get(res.hdr.Get("Location"))
		mustContain(t, "audit page after bulk", page.body, "3 jobs retried.", "bulk_retry", "anonymous")

		ro := e.handler(&dashboard.Options{ReadOnly: true})
		if res := do(t, ro, httptest.NewRequest(http.MethodGet, "/jobs?state=available&queue=payments", nil)); strings.Contains(res.body, "all 3 matching") {
			t.Errorf("read-only jobs page offers bulk actions")
		}
		if res := do(t, ro, httptest.NewRequest(http.MethodGet, "/bulk?action=discard&state=available", nil)); res.code != http.StatusForbidden {
			t.Errorf("read-only GET /bulk = %d, want 403", res.code)
		}
	})
}
