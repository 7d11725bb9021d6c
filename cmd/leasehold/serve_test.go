package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startServe runs serve on a free loopback port and returns its base URL;
// the server stops, and its exit is checked, when the test ends.
func startServe(t *testing.T, b *backend, args ...string) string {
	t.Helper()
	base, _ := startServeBanner(t, b, args...)
	return base
}

// startServeBanner is startServe that also returns the start-up banner.
func startServeBanner(t *testing.T, b *backend, args ...string) (base, banner string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runTree(ctx, &out, &errOut, append([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", b.url}, args...)...)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after shutdown, want nil", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("serve did not stop within 15 s of its context ending")
		}
	})
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)/`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			return m[1], out.String()
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited early: %v\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve printed no address within 10 s: %q", out.String())
		}
	}
}

// get requests url with an optional Authorization header and returns the
// status and body.
func get(t *testing.T, url, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(body)
}

func TestServe(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		b.enqueue(t, "--kind", "charge", "--queue", "payments")
		base := startServe(t, b)

		code, body := get(t, base+"/healthz", "")
		if code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
			t.Fatalf("/healthz = %d %s", code, body)
		}
		code, body = get(t, base+"/metrics", "")
		if code != http.StatusOK || !strings.Contains(body, `leasehold_jobs{queue="payments",state="available"} 1`) ||
			!strings.Contains(body, "leasehold_database_up 1") {
			t.Fatalf("/metrics = %d\n%s", code, body)
		}
		code, body = get(t, base+"/", "")
		if code != http.StatusOK || !strings.Contains(body, "Leasehold") || !strings.Contains(body, "payments") {
			t.Fatalf("dashboard / = %d\n%s", code, body)
		}
		code, body = get(t, base+"/jobs/1", "")
		if code != http.StatusOK || !strings.Contains(body, "charge") {
			t.Fatalf("dashboard /jobs/1 = %d\n%s", code, body)
		}
	})
}

// TestServeAuth: credentials from the environment guard the dashboard and
// /metrics; /healthz stays open for probes. Not parallel: it sets the
// environment.
func TestServeAuth(t *testing.T) {
	b := migrated(t, newSQLiteBackend(t))
	t.Setenv(dashboardTokenEnv, "s3cret-serve-token-0001")
	t.Setenv(dashboardBasicAuthEnv, "")
	base, banner := startServeBanner(t, b, "--read-only")
	if strings.Contains(banner, "s3cret") || !strings.Contains(banner, "bearer token") {
		t.Errorf("banner %q: want the auth named, never the token", banner)
	}
	for _, path := range []string{"/", "/metrics"} {
		if code, _ := get(t, base+path, ""); code != http.StatusUnauthorized {
			t.Fatalf("%s without the token = %d, want 401", path, code)
		}
		if code, _ := get(t, base+path, "Bearer wrong"); code != http.StatusUnauthorized {
			t.Fatalf("%s with a wrong token = %d, want 401", path, code)
		}
		if code, body := get(t, base+path, "Bearer s3cret-serve-token-0001"); code != http.StatusOK {
			t.Fatalf("%s with the token = %d %s, want 200", path, code, body)
		}
	}
	if code, _ := get(t, base+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("/healthz = %d, want 200 without credentials", code)
	}

	// A browser is sent to the login page; the session it gets there opens
	// the dashboard and /metrics, as the token does.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/stuck", nil)
	req.Header.Set("Accept", "text/html")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/login?next=%2Fstuck" {
		t.Fatalf("browser GET /stuck = %d to %q, want the login page", res.StatusCode, loc)
	}
	session := serveLogin(t, client, base, "s3cret-serve-token-0001")
	for _, path := range []string{"/stuck", "/metrics"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
		req.AddCookie(session)
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s with the session cookie = %d, want 200", path, res.StatusCode)
		}
	}

	t.Setenv(dashboardTokenEnv, "")
	base = startServe(t, b, "--basic-auth", "ops:pw")
	if code, _ := get(t, base+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without basic auth = %d, want 401", code)
	}
	if code, _ := get(t, base+"/metrics", "Basic b3BzOnB3"); code != http.StatusOK { // ops:pw
		t.Fatalf("/metrics with basic auth = %d, want 200", code)
	}
}

func TestServeRefusals(t *testing.T) {
	b := migrated(t, newSQLiteBackend(t))
	t.Setenv(dashboardTokenEnv, "")
	t.Setenv(dashboardBasicAuthEnv, "")
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080", "[::]:0"} {
		r := b.fails(t, "refusing to serve without authentication", "serve", "--addr", addr)
		if !strings.Contains(r.err.Error(), "set a bearer token or basic auth") {
			t.Fatalf("serve --addr %s: %v, want it to say how to fix it", addr, r.err)
		}
	}
	b.fails(t, "--basic-auth must be user:password", "serve", "--basic-auth", "ops")
	// A short token is refused in one line that names where it came from
	// and never shows it.
	r := b.fails(t, "--token is 5 bytes: use at least 16", "serve", "--token", "short")
	if strings.Contains(r.err.Error(), "short") || strings.Contains(r.err.Error(), "\n") {
		t.Errorf("short --token: %q", r.err)
	}
	t.Setenv(dashboardTokenEnv, "s3cret")
	b.fails(t, dashboardTokenEnv+" is 6 bytes: use at least 16", "serve")
	t.Setenv(dashboardTokenEnv, "")
	b.fails(t, "--session-ttl 1s is below 1m", "serve", "--session-ttl", "1s")
	t.Setenv(dashboardBasicAuthEnv, "nopass:")
	b.fails(t, dashboardBasicAuthEnv+" must be user:password", "serve")
	t.Setenv(dashboardBasicAuthEnv, "")
	b.fails(t, "missing port", "serve", "--addr", "localhost")

	// An unreachable database fails before listening.
	pg := &backend{url: "postgres://u@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"}
	r = pg.run(t, "serve", "--addr", "127.0.0.1:0")
	if r.err == nil || !strings.Contains(r.err.Error(), "cannot reach Postgres") || errors.Is(r.err, context.Canceled) {
		t.Fatalf("serve on an unreachable database: %v", r.err)
	}
}

// serveLogin signs in on serve's login page and returns the session cookie.
func serveLogin(t *testing.T, client *http.Client, base, token string) *http.Cookie {
	t.Helper()
	res, err := client.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var csrf *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "leasehold_csrf" {
			csrf = c
		}
	}
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(string(body))
	if res.StatusCode != http.StatusOK || csrf == nil || m == nil {
		t.Fatalf("GET /login = %d, CSRF cookie %v:\n%s", res.StatusCode, csrf, body)
	}
	form := url.Values{"csrf": {m[1]}, "token": {token}}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(csrf)
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "leasehold_session" && res.StatusCode == http.StatusSeeOther {
			return c
		}
	}
	t.Fatalf("POST /login = %d with no session cookie", res.StatusCode)
	return nil
}

func TestBannerURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr  string
		got   net.Addr
		want  string
		every bool
	}{
		{"0.0.0.0:8080", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080", true},
		{":8080", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080", true},
		{":0", &net.TCPAddr{IP: net.IPv6unspecified, Port: 41234}, "http://127.0.0.1:41234", true},
		{"[::]:9000", &net.TCPAddr{IP: net.IPv6unspecified, Port: 9000}, "http://[::1]:9000", true},
		{"[::1]:0", &net.TCPAddr{IP: net.IPv6loopback, Port: 5555}, "http://[::1]:5555", false},
		{"127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081}, "http://127.0.0.1:8081", false},
		{"localhost:8080", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://localhost:8080", false},
		{"10.0.0.5:80", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 80}, "http://10.0.0.5:80", false},
		{"[fe80::1%eth0]:80", &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 80, Zone: "eth0"}, "http://[fe80::1%eth0]:80", false},
	} {
		got, every := bannerURL(tc.addr, tc.got)
		if got != tc.want || every != tc.every {
			t.Errorf("bannerURL(%q, %v) = %q, %v; want %q, %v", tc.addr, tc.got, got, every, tc.want, tc.every)
		}
	}
}
