package dashboard_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/dashboard"
)

const (
	loginToken = "correct-horse-battery-staple"
	otherToken = "another-token-of-enough-length"
)

// mintSession builds a session cookie value as the dashboard documents it:
// "v1.<unix expiry>.<hex HMAC-SHA256 over "v1.<expiry>">", keyed by
// HMAC-SHA256(token, "leasehold dashboard session v1").
func mintSession(token string, exp time.Time) string {
	k := hmac.New(sha256.New, []byte(token))
	k.Write([]byte("leasehold dashboard session v1"))
	payload := "v1." + strconv.FormatInt(exp.Unix(), 10)
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write([]byte(payload))
	return payload + "." + hex.EncodeToString(m.Sum(nil))
}

func sessionOf(res *response) *http.Cookie {
	for _, c := range (&http.Response{Header: res.hdr}).Cookies() {
		if c.Name == "leasehold_session" {
			return c
		}
	}
	return nil
}

// browse asks for path as a browser would, with the given cookies.
func browse(t *testing.T, h http.Handler, path string, cookies ...*http.Cookie) *response {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	for _, c := range cookies {
		r.AddCookie(c)
	}
	return do(t, h, r)
}

// login posts the login form with token from a browser session.
func (e *env) login(h http.Handler, sess *session, token, next string, setup ...func(*http.Request)) *response {
	e.t.Helper()
	form := url.Values{"csrf": {sess.token}, "token": {token}}
	if next != "" {
		form.Set("next", next)
	}
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(sess.cookie)
	for _, f := range setup {
		f(r)
	}
	return do(e.t, h, r)
}

func TestLogin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	s := e.seed()
	h := e.handler(&dashboard.Options{BearerToken: loginToken})

	// The login page: a form with the CSRF token and a password field.
	res := browse(t, h, "/login?next=%2Fstuck")
	if res.code != 200 {
		t.Fatalf("GET /login = %d:\n%s", res.code, res.body)
	}
	mustContain(t, "login page", res.body, `action="/login"`, `type="password" name="token"`, `name="next" value="/stuck"`, `name="csrf"`)
	mustNotContain(t, "login page", res.body, `href="/jobs"`, loginToken)
	sess := e.session(h, "/login")

	// A wrong token: 401, the form again, no session.
	res = e.login(h, sess, "correct-horse-battery-stapl", "")
	if res.code != http.StatusUnauthorized || sessionOf(res) != nil || !strings.Contains(res.body, "Wrong token") {
		t.Errorf("wrong token = %d, cookie %v:\n%s", res.code, sessionOf(res), res.body)
	}
	// No CSRF token: refused before the token is looked at.
	res = e.login(h, &session{cookie: sess.cookie, token: ""}, loginToken, "")
	if res.code != http.StatusForbidden || sessionOf(res) != nil {
		t.Errorf("login without CSRF token = %d, cookie %v", res.code, sessionOf(res))
	}

	// The right token: a session cookie with the right attributes, and back
	// to the page asked for.
	res = e.login(h, sess, loginToken, "/jobs?state=stuck")
	c := sessionOf(res)
	if res.code != http.StatusSeeOther || c == nil {
		t.Fatalf("login = %d, cookie %v:\n%s", res.code, c, res.body)
	}
	if loc := res.hdr.Get("Location"); loc != "/jobs?state=stuck" {
		t.Errorf("login redirects to %q, want /jobs?state=stuck", loc)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure ||
		c.MaxAge != int(dashboard.DefaultSessionTTL/time.Second) {
		t.Errorf("session cookie over plain HTTP %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure, Max-Age 12h", c)
	}
	if strings.Contains(c.Value, loginToken) {
		t.Error("the session cookie holds the token")
	}
	// Over TLS, or with SecureCookies, the cookie is Secure.
	if c := sessionOf(e.login(h, sess, loginToken, "", func(r *http.Request) { r.TLS = &tls.ConnectionState{} })); c == nil || !c.Secure {
		t.Errorf("session cookie over TLS %+v, want Secure", c)
	}
	secure := e.handler(&dashboard.Options{BearerToken: loginToken, SecureCookies: true, SessionTTL: time.Hour})
	if c := sessionOf(e.login(secure, e.session(secure, "/login"), loginToken, "")); c == nil || !c.Secure || c.MaxAge != 3600 {
		t.Errorf("session cookie with SecureCookies and a 1h TTL %+v", c)
	}

	// The session opens pages, and offers to sign out.
	res = browse(t, h, "/stuck", c)
	if res.code != 200 {
		t.Fatalf("GET /stuck with the session = %d", res.code)
	}
	mustContain(t, "signed-in page", res.body, fmt.Sprintf(`id="job-%d"`, s.stuck), `action="/logout"`, "Sign out")
	if res := browse(t, h, "/login", c); res.code != http.StatusSeeOther || res.hdr.Get("Location") != "/" {
		t.Errorf("login page when signed in = %d to %q, want a redirect to /", res.code, res.hdr.Get("Location"))
	}
	// A restart with the same token keeps the session.
	if res := browse(t, e.handler(&dashboard.Options{BearerToken: loginToken}), "/", c); res.code != 200 {
		t.Errorf("session after a restart with the same token = %d", res.code)
	}
	// So does a cookie minted as documented.
	if res := browse(t, h, "/", &http.Cookie{Name: "leasehold_session", Value: mintSession(loginToken, time.Now().Add(time.Hour))}); res.code != 200 {
		t.Errorf("a valid minted session = %d", res.code)
	}

	// Refused sessions: each sends the browser to the login page again.
	forged := []byte(c.Value)
	forged[len(forged)-1] ^= 1
	for name, v := range map[string]string{
		"forged signature":   string(forged),
		"changed expiry":     "v1." + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + c.Value[strings.LastIndex(c.Value, "."):],
		"expired":            mintSession(loginToken, time.Now().Add(-time.Second)),
		"beyond the TTL":     mintSession(loginToken, time.Now().Add(dashboard.DefaultSessionTTL+time.Hour)),
		"another token":      mintSession(otherToken, time.Now().Add(time.Hour)),
		"another version":    "v2" + mintSession(loginToken, time.Now().Add(time.Hour))[2:],
		"the token itself":   loginToken,
		"empty":              "",
		"garbage":            "v1.x.zz",
		"unsigned expiry":    "v1." + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + ".",
		"key not the token":  mintSession("leasehold dashboard session v1", time.Now().Add(time.Hour)),
		"expiry overflowing": "v1.99999999999999999999." + strings.Repeat("0", 64),
	} {
		res := browse(t, h, "/", &http.Cookie{Name: "leasehold_session", Value: v})
		if res.code != http.StatusSeeOther || !strings.HasPrefix(res.hdr.Get("Location"), "/login") {
			t.Errorf("%s session: GET / = %d to %q, want a redirect to the login page", name, res.code, res.hdr.Get("Location"))
		}
	}
	// A session from the old token is refused once the token changes.
	if res := browse(t, e.handler(&dashboard.Options{BearerToken: otherToken}), "/", c); res.code != http.StatusSeeOther {
		t.Errorf("session after the token changed = %d, want a redirect to the login page", res.code)
	}

	// Signing out clears the cookie; it needs the CSRF token.
	out := func(csrf string) *response {
		r := httptest.NewRequest(http.MethodPost, "/logout", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(sess.cookie)
		r.AddCookie(c)
		return do(t, h, r)
	}
	if res := out("0000"); res.code != http.StatusForbidden || sessionOf(res) != nil {
		t.Errorf("logout without the CSRF token = %d, cookie %v", res.code, sessionOf(res))
	}
	res = out(sess.token)
	if cl := sessionOf(res); res.code != http.StatusSeeOther || res.hdr.Get("Location") != "/login" || cl == nil || cl.MaxAge >= 0 || cl.Value != "" {
		t.Errorf("logout = %d to %q, cookie %+v: want the cookie cleared and the login page", res.code, res.hdr.Get("Location"), cl)
	}
}

func TestLoginRedirects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	h := e.handler(&dashboard.Options{BearerToken: loginToken})

	// A browser asking for a page goes to the login page, to come back.
	for path, want := range map[string]string{
		"/":                         "/login",
		"/jobs?state=stuck&limit=5": "/login?next=%2Fjobs%3Fstate%3Dstuck%26limit%3D5",
		"/jobs/7":                   "/login?next=%2Fjobs%2F7",
	} {
		res := browse(t, h, path)
		if res.code != http.StatusSeeOther || res.hdr.Get("Location") != want {
			t.Errorf("browser GET %s = %d to %q, want 303 to %q", path, res.code, res.hdr.Get("Location"), want)
		}
	}
	// Scripts, live refreshes and posts get 401 with a challenge.
	for name, r := range map[string]*http.Request{
		"script":       httptest.NewRequest(http.MethodGet, "/", nil),
		"json":         withHeader(httptest.NewRequest(http.MethodGet, "/jobs", nil), "Accept", "application/json"),
		"live refresh": withHeader(withHeader(httptest.NewRequest(http.MethodGet, "/", nil), "Accept", "text/html"), "X-Leasehold-Fragment", "1"),
		"wrong bearer": withHeader(withHeader(httptest.NewRequest(http.MethodGet, "/", nil), "Accept", "text/html"), "Authorization", "Bearer "+otherToken),
		"post":         withHeader(httptest.NewRequest(http.MethodPost, "/jobs/1/retry", nil), "Accept", "text/html"),
		"metrics-like": httptest.NewRequest(http.MethodGet, "/stuck", nil),
	} {
		res := do(t, h, r)
		if res.code != http.StatusUnauthorized || res.hdr.Get("WWW-Authenticate") != `Bearer realm="leasehold"` {
			t.Errorf("%s: %d, WWW-Authenticate %q; want 401 with a Bearer challenge", name, res.code, res.hdr.Get("WWW-Authenticate"))
		}
	}
	// Bearer auth keeps working for scripts.
	if res := do(t, h, withHeader(httptest.NewRequest(http.MethodGet, "/", nil), "Authorization", "Bearer "+loginToken)); res.code != 200 {
		t.Errorf("bearer = %d", res.code)
	}

	// After signing in, only the dashboard's own pages are a destination.
	sess := e.session(h, "/login")
	for _, next := range []string{
		"https://evil.example/", "//evil.example/", "/\\evil.example", "\\\\evil.example", "javascript:alert(1)",
		"http:/evil.example", "/login", "/login?next=//evil.example", "evil", "/%0d%0aSet-Cookie:x=1",
	} {
		res := e.login(h, sess, loginToken, next)
		if loc := res.hdr.Get("Location"); res.code != http.StatusSeeOther || loc != "/" {
			t.Errorf("login with next %q = %d to %q, want /", next, res.code, loc)
		}
		lp := browse(t, h, "/login?next="+url.QueryEscape(next))
		mustNotContain(t, "login page for next "+next, lp.body, `name="next"`)
	}
	if loc := e.login(h, sess, loginToken, "/jobs/7?x=%2F").hdr.Get("Location"); loc != "/jobs/7?x=%2F" {
		t.Errorf("login with a local next redirects to %q", loc)
	}

	// Mounted under a prefix: the cookie and the redirects stay inside it.
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", e.handler(&dashboard.Options{BearerToken: loginToken})))
	res := browse(t, mux, "/ops/stuck")
	if loc := res.hdr.Get("Location"); res.code != http.StatusSeeOther || loc != "/ops/login?next=%2Fops%2Fstuck" {
		t.Errorf("mounted browser GET = %d to %q", res.code, loc)
	}
	msess := e.session(mux, "/ops/login")
	r := httptest.NewRequest(http.MethodPost, "/ops/login", strings.NewReader(url.Values{"csrf": {msess.token}, "token": {loginToken}, "next": {"/stuck"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(msess.cookie)
	res = do(t, mux, r)
	if c := sessionOf(res); c == nil || c.Path != "/ops/" || res.hdr.Get("Location") != "/ops/" {
		t.Errorf("mounted login: cookie %+v, Location %q; want Path /ops/ and a next outside the mount refused", c, res.hdr.Get("Location"))
	}

	// Without a token there is nothing to sign in to.
	if res := browse(t, e.h, "/login"); res.code != http.StatusSeeOther || res.hdr.Get("Location") != "/" {
		t.Errorf("login without a token = %d to %q", res.code, res.hdr.Get("Location"))
	}
	// Basic auth alone keeps the browser's own prompt.
	basic := e.handler(&dashboard.Options{BasicAuth: &dashboard.BasicAuth{Username: "ops", Password: "pa55"}})
	if res := browse(t, basic, "/"); res.code != http.StatusUnauthorized || !strings.HasPrefix(res.hdr.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("basic-only browser GET = %d, %q", res.code, res.hdr.Get("WWW-Authenticate"))
	}
	// With both, the login page offers basic auth, which prompts.
	both := e.handler(&dashboard.Options{BearerToken: loginToken, BasicAuth: &dashboard.BasicAuth{Username: "ops", Password: "pa55"}})
	mustContain(t, "login page with basic auth", browse(t, both, "/login").body, `href="/login?with=basic"`)
	if res := browse(t, both, "/login?with=basic&next=%2Fstuck"); res.code != http.StatusUnauthorized || !strings.HasPrefix(res.hdr.Get("WWW-Authenticate"), "Basic ") {
		t.Errorf("login with basic = %d, %q", res.code, res.hdr.Get("WWW-Authenticate"))
	}
	br := withHeader(httptest.NewRequest(http.MethodGet, "/login?with=basic&next=%2Fstuck", nil), "Accept", "text/html")
	br.SetBasicAuth("ops", "pa55")
	if res := do(t, both, br); res.code != http.StatusSeeOther || res.hdr.Get("Location") != "/stuck" {
		t.Errorf("login with basic credentials = %d to %q", res.code, res.hdr.Get("Location"))
	}
}

// TestLoginThrottle: failed sign-ins are slowed, and an address that fails
// too often is refused for a while even with the right token.
func TestLoginThrottle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newSQLite(t))
	h := e.handler(&dashboard.Options{BearerToken: loginToken})
	sess := e.session(h, "/login")
	from := func(addr string) func(*http.Request) { return func(r *http.Request) { r.RemoteAddr = addr } }
	start := time.Now()
	for i := range 10 {
		if res := e.login(h, sess, "wrong-token-of-some-length", "", from("192.0.2.9:4000")); res.code != http.StatusUnauthorized {
			t.Fatalf("failure %d = %d", i+1, res.code)
		}
	}
	if took := time.Since(start); took < 10*200*time.Millisecond {
		t.Errorf("10 failed sign-ins took %s: want each slowed", took)
	}
	res := e.login(h, sess, loginToken, "", from("192.0.2.9:4001"))
	if res.code != http.StatusTooManyRequests || sessionOf(res) != nil || !strings.Contains(res.body, "Too many failed sign-ins") {
		t.Errorf("after 10 failures the right token = %d, cookie %v:\n%s", res.code, sessionOf(res), res.body)
	}
	if res := e.login(h, sess, loginToken, "", from("198.51.100.7:4000")); res.code != http.StatusSeeOther || sessionOf(res) == nil {
		t.Errorf("another address = %d, cookie %v", res.code, sessionOf(res))
	}
}

func withHeader(r *http.Request, k, v string) *http.Request {
	r.Header.Set(k, v)
	return r
}
