package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// ErrInsecureListen is returned by ListenCheck for an address other hosts
// can reach when no authentication is configured.
var ErrInsecureListen = errors.New("dashboard: refusing to serve without authentication on an address other hosts can reach")

// ListenCheck reports whether serving the dashboard on addr (host:port, as
// given to net.Listen) is safe: an address other than a loopback one
// ("127.0.0.1:8080", "[::1]:8080", "localhost:8080") needs authentication.
// An empty host (":8080") listens on every interface and so needs it too.
func ListenCheck(addr string, auth bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen address %q: %w", addr, err)
	}
	if auth || isLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("%w: %s listens on %s; set a bearer token or basic auth, or listen on 127.0.0.1", ErrInsecureListen, addr, shown)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// setSecurityHeaders sets the headers every response carries. The policy
// allows only the handler's own script and style sheet: no inline code, no
// framing, no other origins.
func setSecurityHeaders(hdr http.Header) {
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
}

func (h *handler) challenge(w http.ResponseWriter) {
	if h.opts.BasicAuth != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="leasehold", charset="UTF-8"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="leasehold"`)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401 unauthorized: this dashboard needs credentials\n"))
}

func secretEqual(got, want string) bool {
	g := sha256.Sum256([]byte(got))
	x := sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], x[:]) == 1
}

// The CSRF token is a double-submitted random secret: the browser keeps it
// in a SameSite=Strict, HttpOnly cookie, and every form repeats it in a
// hidden field (scripts may send it in a header). Another site can neither
// read the cookie nor make the browser send it cross-site.
const (
	csrfCookie = "leasehold_csrf"
	csrfField  = "csrf"
	csrfHeader = "X-CSRF-Token"
)

// csrfToken returns the browser's token, setting a new cookie when it has
// none or a malformed one.
func (h *handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(csrfCookie); err == nil && validToken(c.Value) {
		return c.Value
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails on supported platforms
	tok := hex.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{
		Name: csrfCookie, Value: tok, Path: h.base(r) + "/",
		HttpOnly: true, Secure: h.secure(r), SameSite: http.SameSiteStrictMode,
	})
	return tok
}

func validToken(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// checkCSRF reports why a state-changing request must be refused, or "" to
// accept it.
func (h *handler) checkCSRF(r *http.Request) string {
	if err := h.cop.Check(r); err != nil {
		return "cross-origin request refused"
	}
	c, err := r.Cookie(csrfCookie)
	if err != nil || !validToken(c.Value) {
		return "missing CSRF cookie: reload the page and try again"
	}
	sent := r.Header.Get(csrfHeader)
	if sent == "" {
		sent = r.PostFormValue(csrfField)
	}
	if sent == "" {
		return "missing CSRF token"
	}
	if subtle.ConstantTimeCompare([]byte(sent), []byte(c.Value)) != 1 {
		return "wrong CSRF token: reload the page and try again"
	}
	return ""
}
