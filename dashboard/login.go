package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// A browser signs in once with the bearer token on the login page and then
// carries a session cookie. The cookie is stateless: its value is an expiry
// and an HMAC-SHA256 over it, keyed by a key derived from the token, so
// restarting with the same token keeps sessions valid, changing the token
// invalidates every session, and no one without the token can mint one. A
// session cannot be revoked before it expires except by changing the token;
// signing out clears the browser's copy.
const (
	sessionCookie = "leasehold_session"
	// sessionVersion prefixes the cookie value and the key derivation, so a
	// future format never accepts an old cookie by accident.
	sessionVersion = "v1"
	// DefaultSessionTTL is how long a browser session lasts when
	// Options.SessionTTL is zero.
	DefaultSessionTTL = 12 * time.Hour
	// MinTokenLen is the shortest bearer token New accepts, in bytes.
	MinTokenLen = 16
)

// loginDelay slows every failed sign-in, and loginBurst failures from one
// address within loginWindow make further attempts wait out the window.
const (
	loginDelay  = 300 * time.Millisecond
	loginBurst  = 10
	loginWindow = time.Minute
	// maxLimited bounds the addresses the limiter remembers; past it the
	// oldest windows are dropped.
	maxLimited = 4096
)

// sessionKey derives the session signing key from the bearer token.
func sessionKey(token string) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("leasehold dashboard session " + sessionVersion))
	return m.Sum(nil)
}

// sessionValue is the cookie value for a session that ends at exp.
func sessionValue(key []byte, exp time.Time) string {
	payload := sessionVersion + "." + strconv.FormatInt(exp.Unix(), 10)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return payload + "." + hex.EncodeToString(m.Sum(nil))
}

// validSession reports whether v is a session cookie signed with key that
// has not expired at now. An expiry further away than ttl (a cookie minted
// before SessionTTL was lowered) is refused too.
func validSession(key []byte, v string, now time.Time, ttl time.Duration) bool {
	parts := strings.Split(v, ".")
	if len(parts) != 3 || parts[0] != sessionVersion {
		return false
	}
	sig, err := hex.DecodeString(parts[2])
	if err != nil {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, m.Sum(nil)) {
		return false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return false
	}
	left := time.Unix(exp, 0).Sub(now)
	return left > 0 && left <= ttl+time.Minute
}

// Authenticate reports whether r carries the credentials o requires, or o
// requires none: the bearer token in an Authorization header, the basic auth
// user and password, or a session cookie set by the dashboard's login page.
// Secrets are compared in constant time. Use it to guard other handlers
// (such as /metrics) with the dashboard's credentials.
func (o *Options) Authenticate(r *http.Request) bool {
	ok, _ := o.authenticate(r, time.Now())
	return ok
}

// authenticate is Authenticate at a given time; it also reports whether the
// credentials were a session cookie, which pages show as signed in.
func (o *Options) authenticate(r *http.Request, now time.Time) (ok, session bool) {
	if !o.HasAuth() {
		return true, false
	}
	authz := r.Header.Get("Authorization")
	if o.BearerToken != "" {
		if scheme, tok, ok := strings.Cut(authz, " "); ok && strings.EqualFold(scheme, "Bearer") {
			if secretEqual(strings.TrimSpace(tok), o.BearerToken) {
				return true, false
			}
		}
	}
	if ba := o.BasicAuth; ba != nil {
		if user, pass, ok := r.BasicAuth(); ok {
			// Both compared every time, so a right user name is not faster.
			u := secretEqual(user, ba.Username)
			p := secretEqual(pass, ba.Password)
			if u && p {
				return true, false
			}
		}
	}
	if o.BearerToken != "" {
		if c, err := r.Cookie(sessionCookie); err == nil && validSession(sessionKey(o.BearerToken), c.Value, now, o.sessionTTL()) {
			return true, true
		}
	}
	return false, false
}

func (o *Options) sessionTTL() time.Duration {
	if o.SessionTTL > 0 {
		return o.SessionTTL
	}
	return DefaultSessionTTL
}

// wantsPage reports whether an unauthenticated request is a browser asking
// for a page, which is sent to the login page rather than answered 401.
func wantsPage(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if r.Header.Get(fragmentHeader) != "" || r.Header.Get("Authorization") != "" {
		return false
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// loginPath is the login page's path within the handler.
const loginPath = "/login"

// toLogin redirects a browser to the login page, to come back to the page
// it asked for.
func (h *handler) toLogin(w http.ResponseWriter, r *http.Request) {
	base := h.base(r)
	want := base + r.URL.Path
	if r.URL.Path == "" {
		want = base + "/"
	}
	if r.URL.RawQuery != "" {
		want += "?" + r.URL.RawQuery
	}
	target := base + loginPath
	if want != base+"/" {
		target += "?" + url.Values{"next": {want}}.Encode()
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// localNext returns raw when it is a path to one of the dashboard's own
// pages (under base), with its query, else "": a crafted link cannot send
// the browser to another site after signing in.
func localNext(raw, base string) string {
	if raw == "" || strings.ContainsAny(raw, "\\\r\n\t") {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!strings.HasPrefix(u.Path, base+"/") || strings.HasPrefix(u.Path, "//") ||
		strings.HasPrefix(u.Path, base+loginPath) || strings.ContainsFunc(u.Path, unicode.IsControl) {
		return ""
	}
	if u.RawQuery != "" {
		return u.EscapedPath() + "?" + u.RawQuery
	}
	return u.EscapedPath()
}

type loginData struct {
	Next  string
	Error string
	Basic bool // basic auth is accepted too
}

// login serves the login page and checks the token it posts.
func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	p.template, p.Title, p.Nav = "login", "Sign in", "login"
	p.Refresh = 0
	if h.opts.BearerToken == "" {
		// Nothing to sign in with: basic auth prompts, no auth lets in.
		http.Redirect(w, r, p.Base+"/", http.StatusSeeOther)
		return
	}
	d := &loginData{Basic: h.opts.BasicAuth != nil}
	p.Data = d
	if r.Method != http.MethodPost {
		q := r.URL.Query()
		d.Next = localNext(q.Get("next"), p.Base)
		if ok, _ := h.opts.authenticate(r, h.now()); ok {
			h.afterLogin(w, r, p.Base, d.Next)
			return
		}
		if d.Basic && q.Get("with") == "basic" {
			// The browser prompts for the user name and password, then
			// asks again with them and is let through above.
			h.challenge(w)
			return
		}
		h.render(w, r, http.StatusOK, p)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if why := h.checkCSRF(r); why != "" {
		h.renderError(w, r, p, &httpError{code: http.StatusForbidden, msg: why})
		return
	}
	d.Next = localNext(r.PostFormValue("next"), p.Base)
	addr := clientAddr(r)
	if !h.limiter.allow(addr, h.now()) {
		d.Error = "Too many failed sign-ins from this address: wait a minute and try again."
		h.render(w, r, http.StatusTooManyRequests, p)
		return
	}
	if !secretEqual(strings.TrimSpace(r.PostFormValue("token")), h.opts.BearerToken) {
		h.limiter.fail(addr, h.now())
		sleep(r.Context(), loginDelay)
		d.Error = "Wrong token."
		h.render(w, r, http.StatusUnauthorized, p)
		return
	}
	ttl := h.opts.sessionTTL()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: sessionValue(h.sessionKey, h.now().Add(ttl)), Path: p.Base + "/",
		MaxAge: int(ttl / time.Second), HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode,
	})
	h.afterLogin(w, r, p.Base, d.Next)
}

func (h *handler) afterLogin(w http.ResponseWriter, r *http.Request, base, next string) {
	if next == "" {
		next = base + "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout clears the session cookie and shows the login page. It needs the
// CSRF token, so another site cannot sign the operator out.
func (h *handler) logout(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(w, r)
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if why := h.checkCSRF(r); why != "" {
		h.renderError(w, r, p, &httpError{code: http.StatusForbidden, msg: why})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: p.Base + "/", MaxAge: -1,
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, p.Base+loginPath, http.StatusSeeOther)
}

// secure reports whether cookies must be marked Secure: the request came
// over TLS, or Options.SecureCookies says a proxy terminates it.
func (h *handler) secure(r *http.Request) bool {
	return r.TLS != nil || h.opts.SecureCookies
}

// clientAddr is the address failed sign-ins are counted against: the peer's
// IP (behind a proxy, the proxy's: every client then shares one budget).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// loginLimiter counts failed sign-ins per address in fixed windows. It is
// the dashboard's only mutable state, and only slows guessing: a token of
// MinTokenLen random bytes cannot be guessed anyway.
type loginLimiter struct {
	mu   sync.Mutex
	seen map[string]*loginWindowCount
}

type loginWindowCount struct {
	start    time.Time
	failures int
}

func (l *loginLimiter) allow(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.seen[addr]
	return c == nil || now.Sub(c.start) >= loginWindow || c.failures < loginBurst
}

func (l *loginLimiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]*loginWindowCount{}
	}
	c := l.seen[addr]
	if c == nil || now.Sub(c.start) >= loginWindow {
		if len(l.seen) >= maxLimited {
			for k, v := range l.seen {
				if now.Sub(v.start) >= loginWindow {
					delete(l.seen, k)
				}
			}
			if len(l.seen) >= maxLimited {
				l.seen = map[string]*loginWindowCount{}
			}
		}
		c = &loginWindowCount{start: now}
		l.seen[addr] = c
	}
	c.failures++
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
