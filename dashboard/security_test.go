package dashboard_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/leasetype"
)

func TestActions(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		sess := e.session(e.h, "/stuck")
		post := func(id int64, action string, form url.Values) *response {
			return e.post(e.h, sess, fmt.Sprintf("/jobs/%d/%s", id, action), form)
		}

		// Retry the stuck job from the stuck page: back to the stuck page.
		res := post(s.stuck, "retry", url.Values{"next": {"/stuck"}})
		if res.code != http.StatusSeeOther {
			t.Fatalf("retry = %d:\n%s", res.code, res.body)
		}
		if loc, want := res.hdr.Get("Location"), fmt.Sprintf("/stuck?done=retry&job=%d", s.stuck); loc != want {
			t.Errorf("retry redirects to %q, want %q", loc, want)
		}
		if j := e.job(s.stuck); j.State != leasetype.JobStateAvailable || j.Expiries != 0 {
			t.Errorf("after retry the stuck job is %s with %d expiries, want available with 0", j.State, j.Expiries)
		}
		page := e.get(fmt.Sprintf("/stuck?done=retry&job=%d", s.stuck))
		mustContain(t, "stuck page after retry", page.body, fmt.Sprintf("Job %d is available again.", s.stuck))

		// Retrying it again is a conflict, not a 500.
		res = post(s.stuck, "retry", nil)
		if res.code != http.StatusConflict || !strings.Contains(res.body, "it is available") {
			t.Errorf("second retry = %d:\n%s", res.code, res.body)
		}
		// Cancelling a running job asks its worker to stop it: the job stays
		// running, with the request recorded (see TestCancelRunning).
		res = post(s.running, "cancel", nil)
		if loc := res.hdr.Get("Location"); res.code != http.StatusSeeOther || loc != fmt.Sprintf("/jobs/%d?done=cancel-requested&job=%d", s.running, s.running) {
			t.Errorf("cancel running = %d to %q", res.code, loc)
		}
		if j := e.job(s.running); j.State != leasetype.JobStateRunning || j.CancelRequestedAt == nil {
			t.Errorf("after cancel the running job is %s with request %v", j.State, j.CancelRequestedAt)
		}

		// Cancel and discard waiting jobs; retry the cancelled one.
		if res = post(s.available, "cancel", nil); res.code != http.StatusSeeOther {
			t.Fatalf("cancel = %d:\n%s", res.code, res.body)
		}
		if loc := res.hdr.Get("Location"); loc != fmt.Sprintf("/jobs/%d?done=cancel&job=%d", s.available, s.available) {
			t.Errorf("cancel redirects to %q", loc)
		}
		if st := e.job(s.available).State; st != leasetype.JobStateCancelled {
			t.Errorf("after cancel: %s", st)
		}
		if res = post(s.scheduled, "discard", url.Values{"next": {"/jobs?queue=reports"}}); res.code != http.StatusSeeOther {
			t.Fatalf("discard = %d", res.code)
		}
		if loc := res.hdr.Get("Location"); loc != fmt.Sprintf("/jobs?queue=reports&done=discard&job=%d", s.scheduled) {
			t.Errorf("discard redirects to %q", loc)
		}
		if st := e.job(s.scheduled).State; st != leasetype.JobStateDiscarded {
			t.Errorf("after discard: %s", st)
		}
		if res = post(s.available, "retry", nil); res.code != http.StatusSeeOther || e.job(s.available).State != leasetype.JobStateAvailable {
			t.Errorf("retry cancelled = %d, state %s", res.code, e.job(s.available).State)
		}

		// Resolve stuck jobs as succeeded and failed, with a note.
		stuck2 := e.insert(chargeKind, "recon", `{"amount":7}`, "", nil)
		e.makeStuck(stuck2)
		res = post(stuck2, "resolve", url.Values{"as": {"succeeded"}, "note": {"PSP says captured, ref ch_123"}, "next": {"/stuck"}})
		if res.code != http.StatusSeeOther {
			t.Fatalf("resolve succeeded = %d:\n%s", res.code, res.body)
		}
		if j := e.job(stuck2); j.State != leasetype.JobStateCompleted || j.LastError != "PSP says captured, ref ch_123" {
			t.Errorf("after resolve succeeded: %s, last error %q", j.State, j.LastError)
		}
		stuck3 := e.insert(chargeKind, "recon", `{"amount":8}`, "", nil)
		e.makeStuck(stuck3)
		if res = post(stuck3, "resolve", url.Values{"as": {"failed"}}); res.code != http.StatusSeeOther {
			t.Fatalf("resolve failed = %d:\n%s", res.code, res.body)
		}
		if j := e.job(stuck3); j.State != leasetype.JobStateDiscarded || j.LastError != "resolved as failed from the dashboard" {
			t.Errorf("after resolve failed: %s, last error %q", j.State, j.LastError)
		}
		// Resolving a job that is not stuck is a conflict.
		if res = post(s.completed, "resolve", url.Values{"as": {"failed"}}); res.code != http.StatusConflict {
			t.Errorf("resolve completed = %d", res.code)
		}

		// Bad requests.
		for _, tc := range []struct {
			path string
			form url.Values
			code int
		}{
			{fmt.Sprintf("/jobs/%d/resolve", s.completed), url.Values{"as": {"maybe"}}, 400},
			{fmt.Sprintf("/jobs/%d/resolve", s.completed), url.Values{"as": {"failed"}, "note": {strings.Repeat("n", 2001)}}, 400},
			{fmt.Sprintf("/jobs/%d/explode", s.completed), nil, 404},
			{"/jobs/abc/retry", nil, 400},
			{"/jobs/999999/retry", nil, 404},
		} {
			if res := e.post(e.h, sess, tc.path, tc.form); res.code != tc.code {
				t.Errorf("POST %s %v = %d, want %d:\n%s", tc.path, tc.form, res.code, tc.code, res.body)
			}
		}
		// A "next" that leaves the dashboard is ignored.
		for _, next := range []string{"https://evil.example/", "//evil.example/x", "/\\evil.example", "javascript:alert(1)"} {
			j := e.insert("email", "default", `{}`, "", nil)
			res := post(j, "cancel", url.Values{"next": {next}})
			if loc := res.hdr.Get("Location"); loc != fmt.Sprintf("/jobs/%d?done=cancel&job=%d", j, j) {
				t.Errorf("next %q: redirect to %q", next, loc)
			}
		}
		// State changes are POST only.
		if res := e.get(fmt.Sprintf("/jobs/%d/retry", s.completed)); res.code == http.StatusSeeOther || res.code == http.StatusOK {
			t.Errorf("GET retry = %d", res.code)
		}
	})
}

func TestCSRF(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		path := fmt.Sprintf("/jobs/%d/retry", s.stuck)
		sess := e.session(e.h, "/stuck")
		other := e.session(e.h, "/")
		if other.token == sess.token {
			t.Fatal("two sessions got the same CSRF token")
		}
		for name, tc := range map[string]struct {
			sess *session
			form url.Values
		}{
			"no cookie, no token":      {nil, nil},
			"no cookie":                {nil, url.Values{"csrf": {sess.token}}},
			"no token":                 {&session{cookie: sess.cookie}, url.Values{"csrf": {""}}},
			"wrong token":              {sess, url.Values{"csrf": {other.token}}},
			"token of wrong length":    {sess, url.Values{"csrf": {sess.token[:10]}}},
			"cookie of other token":    {&session{cookie: other.cookie, token: sess.token}, nil},
			"cookie of bad format":     {&session{cookie: &http.Cookie{Name: "leasehold_csrf", Value: "x"}, token: "x"}, nil},
			"token in query, not form": {&session{cookie: sess.cookie}, url.Values{"csrf": {""}, "q": {"?csrf=" + sess.token}}},
		} {
			res := e.post(e.h, tc.sess, path, tc.form)
			if res.code != http.StatusForbidden {
				t.Errorf("%s: POST = %d, want 403", name, res.code)
			}
		}
		// A cross-site browser request is refused even with the right token.
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(url.Values{"csrf": {sess.token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Sec-Fetch-Site", "cross-site")
		r.AddCookie(sess.cookie)
		if res := do(t, e.h, r); res.code != http.StatusForbidden {
			t.Errorf("cross-site POST = %d, want 403", res.code)
		}
		if st := e.job(s.stuck).State; st != leasetype.JobStateStuck {
			t.Fatalf("a refused POST changed the job: %s", st)
		}
		// The token in a header (for scripts) works.
		r = httptest.NewRequest(http.MethodPost, path, nil)
		r.Header.Set("X-CSRF-Token", sess.token)
		r.AddCookie(sess.cookie)
		if res := do(t, e.h, r); res.code != http.StatusSeeOther {
			t.Errorf("POST with header token = %d:\n%s", res.code, res.body)
		}
		if st := e.job(s.stuck).State; st != leasetype.JobStateAvailable {
			t.Errorf("after an accepted POST the job is %s", st)
		}
		// A page keeps the browser's cookie rather than minting a new one.
		r = httptest.NewRequest(http.MethodGet, fmt.Sprintf("/jobs/%d", s.completed), nil)
		r.AddCookie(sess.cookie)
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if len(w.Result().Cookies()) != 0 || !strings.Contains(w.Body.String(), sess.token) {
			t.Errorf("a page replaced the session's CSRF cookie")
		}
	})
}

func TestAuth(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		both := e.handler(&dashboard.Options{BearerToken: "s3cret-token-long-enough", BasicAuth: &dashboard.BasicAuth{Username: "ops", Password: "pa55"}})
		bearer := e.handler(&dashboard.Options{BearerToken: "s3cret-token-long-enough"})
		for name, tc := range map[string]struct {
			h     http.Handler
			setup func(r *http.Request)
			code  int
			chal  string
		}{
			"none":                     {both, func(r *http.Request) {}, 401, "Basic"},
			"bearer":                   {both, func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-token-long-enough") }, 200, ""},
			"bearer lower":             {both, func(r *http.Request) { r.Header.Set("Authorization", "bearer s3cret-token-long-enough") }, 200, ""},
			"wrong bearer":             {both, func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-tokeN") }, 401, "Basic"},
			"prefix bearer":            {both, func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret") }, 401, "Basic"},
			"basic":                    {both, func(r *http.Request) { r.SetBasicAuth("ops", "pa55") }, 200, ""},
			"wrong password":           {both, func(r *http.Request) { r.SetBasicAuth("ops", "pass") }, 401, "Basic"},
			"wrong user":               {both, func(r *http.Request) { r.SetBasicAuth("root", "pa55") }, 401, "Basic"},
			"bearer only, basic given": {bearer, func(r *http.Request) { r.SetBasicAuth("ops", "s3cret-token-long-enough") }, 401, "Bearer"},
			"bearer only, none":        {bearer, func(r *http.Request) {}, 401, "Bearer"},
			"bearer only, ok":          {bearer, func(r *http.Request) { r.Header.Set("Authorization", "Bearer s3cret-token-long-enough") }, 200, ""},
		} {
			for _, path := range []string{"/", "/stuck", "/jobs/1", "/discarded"} {
				r := httptest.NewRequest(http.MethodGet, path, nil)
				tc.setup(r)
				res := do(t, tc.h, r)
				if res.code != tc.code {
					t.Errorf("%s: GET %s = %d, want %d", name, path, res.code, tc.code)
				}
				if tc.chal != "" && !strings.HasPrefix(res.hdr.Get("WWW-Authenticate"), tc.chal+" realm=") {
					t.Errorf("%s: WWW-Authenticate %q", name, res.hdr.Get("WWW-Authenticate"))
				}
			}
		}
		// The static assets are public: the login page needs them, and they
		// hold no data.
		if res := do(t, both, httptest.NewRequest(http.MethodGet, "/static/app.css", nil)); res.code != 200 {
			t.Errorf("GET /static/app.css without credentials = %d, want 200", res.code)
		}
		// An unauthenticated POST is refused before anything else.
		r := httptest.NewRequest(http.MethodPost, "/jobs/1/retry", nil)
		if res := do(t, both, r); res.code != 401 {
			t.Errorf("unauthenticated POST = %d", res.code)
		}
	})
}

func TestReadOnly(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		ro := e.handler(&dashboard.Options{ReadOnly: true})
		for _, path := range []string{"/stuck", fmt.Sprintf("/jobs/%d", s.stuck), fmt.Sprintf("/jobs/%d", s.completed), "/jobs",
			"/running", fmt.Sprintf("/jobs/%d", s.running)} {
			res := do(t, ro, httptest.NewRequest(http.MethodGet, path, nil))
			if res.code != 200 {
				t.Fatalf("GET %s = %d", path, res.code)
			}
			mustNotContain(t, "read-only "+path, res.body, `method="post"`, "/retry", "/resolve", "/cancel\"")
			mustContain(t, "read-only "+path, res.body, "read-only")
		}
		sess := e.session(ro, "/stuck")
		res := e.post(ro, sess, fmt.Sprintf("/jobs/%d/retry", s.stuck), nil)
		if res.code != http.StatusForbidden || !strings.Contains(res.body, "read-only") {
			t.Errorf("read-only POST = %d:\n%s", res.code, res.body)
		}
		if st := e.job(s.stuck).State; st != leasetype.JobStateStuck {
			t.Errorf("read-only POST changed the job: %s", st)
		}
	})
}

func TestEscaping(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		// A stuck job whose note holds markup, too.
		sess := e.session(e.h, "/stuck")
		if res := e.post(e.h, sess, fmt.Sprintf("/jobs/%d/resolve", s.stuck), url.Values{"as": {"failed"}, "note": {`<img src=x onerror=alert(1)>`}}); res.code != http.StatusSeeOther {
			t.Fatalf("resolve = %d", res.code)
		}
		for _, path := range []string{
			"/", "/jobs", "/jobs?kind=" + url.QueryEscape(xssKind), "/jobs?queue=%3Cscript%3E",
			fmt.Sprintf("/jobs/%d", s.available), fmt.Sprintf("/jobs/%d", s.xssKind), fmt.Sprintf("/jobs/%d", s.retryable),
			fmt.Sprintf("/jobs/%d", s.stuck), "/jobs?state=%3Cscript%3E", "/nope%3Cscript%3E",
		} {
			res := e.get(path)
			mustNotContain(t, path, res.body, "<script>alert", "<img src=x", `<script>alert("kind")`)
			if strings.Count(res.body, "<script") != strings.Count(res.body, `<script src="/static/app.js`) {
				t.Errorf("%s: a <script> element other than the dashboard's own", path)
			}
		}
		mustContain(t, "job with markup in args", e.get(fmt.Sprintf("/jobs/%d", s.available)).body, `&lt;script&gt;alert(&#39;args&#39;)&lt;/script&gt;`)
		mustContain(t, "job with markup in kind", e.get(fmt.Sprintf("/jobs/%d", s.xssKind)).body, `&lt;script&gt;alert(&#34;kind&#34;)&lt;/script&gt;`)
		mustContain(t, "job with markup in error", e.get(fmt.Sprintf("/jobs/%d", s.retryable)).body, `smtp said &lt;script&gt;alert(&#34;error&#34;)&lt;/script&gt;`)
		mustContain(t, "job with markup in note", e.get(fmt.Sprintf("/jobs/%d", s.stuck)).body, `&lt;img src=x onerror=alert(1)&gt;`)
		mustContain(t, "bad state", e.get("/jobs?state=%3Cscript%3E").body, `unknown state &#34;&lt;script&gt;&#34;`)
	})
}

func TestHeadersAndAssets(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		for _, path := range []string{"/", "/jobs", "/jobs/abc", "/static/app.js"} {
			res := e.get(path)
			csp := res.hdr.Get("Content-Security-Policy")
			if csp == "" || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") ||
				!strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("%s: CSP %q", path, csp)
			}
			if res.hdr.Get("X-Content-Type-Options") != "nosniff" || res.hdr.Get("X-Frame-Options") != "DENY" {
				t.Errorf("%s: headers %v", path, res.hdr)
			}
		}
		page := e.get("/").body
		for _, a := range []struct{ name, ct string }{{"app.js", "text/javascript; charset=utf-8"}, {"app.css", "text/css; charset=utf-8"}} {
			res := e.get("/static/" + a.name)
			if res.code != 200 || res.hdr.Get("Content-Type") != a.ct || len(res.body) < 500 {
				t.Errorf("%s: %d %q, %d bytes", a.name, res.code, res.hdr.Get("Content-Type"), len(res.body))
			}
			if !strings.Contains(page, "/static/"+a.name+"?v=") {
				t.Errorf("the page does not link %s with a version", a.name)
			}
		}
		// No inline script, style or event handler anywhere: the CSP would block them.
		for _, path := range []string{"/", "/jobs", "/running", "/stuck", "/schedules", "/jobs/1"} {
			body := e.get(path).body
			mustNotContain(t, path, body, "<style", "style=", "onclick=", "onsubmit=", "<script>")
		}
	})
}

func TestMount(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		for name, opts := range map[string]*dashboard.Options{"from StripPrefix": nil, "BasePath": {BasePath: "/ops/queue/"}} {
			mux := http.NewServeMux()
			mux.Handle("/ops/queue/", http.StripPrefix("/ops/queue", e.handler(opts)))
			srv := httptest.NewServer(mux)
			client := srv.Client()
			client.Jar, _ = cookiejar.New(nil)
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			get := func(path string) *http.Response {
				res, err := client.Get(srv.URL + path)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			res := get("/ops/queue/")
			body := readAll(res)
			if res.StatusCode != 200 {
				t.Fatalf("%s: GET / = %d", name, res.StatusCode)
			}
			mustContain(t, name, body, `href="/ops/queue/jobs"`, `href="/ops/queue/stuck"`, `src="/ops/queue/static/app.js?v=`,
				`href="/ops/queue/jobs?queue=payments"`, `action="/ops/queue/queues/payments/pause"`)
			if strings.Contains(body, `href="/jobs`) {
				t.Errorf("%s: a link escapes the mount", name)
			}
			var cookie *http.Cookie
			for _, c := range res.Cookies() {
				cookie = c
			}
			if cookie == nil || cookie.Path != "/ops/queue/" {
				t.Errorf("%s: CSRF cookie %+v, want path /ops/queue/", name, cookie)
			}
			r := get("/ops/queue/static/app.css")
			readAll(r) // closes the body, which would otherwise keep its connection's goroutines
			if r.StatusCode != 200 {
				t.Errorf("%s: static = %d", name, r.StatusCode)
			}
			stuck := readAll(get("/ops/queue/stuck"))
			mustContain(t, name+" stuck", stuck, fmt.Sprintf(`action="/ops/queue/jobs/%d/resolve"`, s.stuck), `name="next" value="/ops/queue/stuck"`)
			// An action redirects within the mount.
			tok := tokenField.FindStringSubmatch(stuck)
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/ops/queue/jobs/%d/cancel", srv.URL, s.available),
				strings.NewReader(url.Values{"csrf": {tok[1]}, "next": {"/ops/queue/stuck"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			pr, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			pr.Body.Close()
			if loc := pr.Header.Get("Location"); pr.StatusCode != 303 || !strings.HasPrefix(loc, "/ops/queue/stuck?") {
				t.Errorf("%s: action = %d to %q", name, pr.StatusCode, loc)
			}
			if _, err := e.client.JobRetry(t.Context(), s.available); err != nil {
				t.Fatal(err)
			}
			srv.Close()
		}
	})
}

func readAll(res *http.Response) string {
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := res.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	e := &env{t: t}
	e = newEnv(t, newSQLite(t))
	for _, opts := range []*dashboard.Options{
		{BasePath: "ops"}, {BasePath: "//evil"}, {BasePath: `/a"b`},
		{BasicAuth: &dashboard.BasicAuth{Username: "ops"}}, {RefreshInterval: 10},
		{BearerToken: "s3cret"}, {BearerToken: strings.Repeat("x", dashboard.MinTokenLen-1)},
		{BearerToken: " padded-token-of-enough-length"}, {SessionTTL: time.Second}, {SessionTTL: -time.Hour},
	} {
		if _, err := dashboard.New(e.client, opts); err == nil {
			t.Errorf("New(%+v) accepted bad options", opts)
		}
	}
	_, err := dashboard.New(e.client, &dashboard.Options{BearerToken: "s3cret"})
	if err == nil || !strings.Contains(err.Error(), "6 bytes; use at least 16") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("New with a short token: %v; want the length and the minimum, not the token", err)
	}
	if _, err := dashboard.New(e.client, &dashboard.Options{BearerToken: strings.Repeat("x", dashboard.MinTokenLen)}); err != nil {
		t.Errorf("New with a %d-byte token: %v", dashboard.MinTokenLen, err)
	}
	if _, err := dashboard.New(nil, nil); err == nil {
		t.Error("New(nil) accepted no source")
	}
	// No live refresh: the page says so, and the script stays idle.
	h := e.handler(&dashboard.Options{RefreshInterval: -1})
	if res := do(t, h, httptest.NewRequest(http.MethodGet, "/", nil)); !strings.Contains(res.body, `data-refresh="0"`) {
		t.Error("refresh interval -1 still refreshes")
	}
}

func TestListenCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr string
		auth bool
		ok   bool
	}{
		{"127.0.0.1:8080", false, true},
		{"127.0.0.2:8080", false, true},
		{"[::1]:8080", false, true},
		{"localhost:8080", false, true},
		{"0.0.0.0:8080", false, false},
		{"0.0.0.0:8080", true, true},
		{":8080", false, false},
		{":8080", true, true},
		{"[::]:8080", false, false},
		{"10.0.0.5:80", false, false},
		{"example.com:80", false, false},
		{"example.com:80", true, true},
		{"nonsense", true, false},
	} {
		err := dashboard.ListenCheck(tc.addr, tc.auth)
		if (err == nil) != tc.ok {
			t.Errorf("ListenCheck(%q, %v) = %v", tc.addr, tc.auth, err)
		}
		if err != nil && tc.addr != "nonsense" {
			if !errors.Is(err, dashboard.ErrInsecureListen) || !strings.Contains(err.Error(), "authentication") || !strings.Contains(err.Error(), "127.0.0.1") {
				t.Errorf("ListenCheck(%q): unclear error %q", tc.addr, err)
			}
		}
	}
}
