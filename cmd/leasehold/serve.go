package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/leaseholdprom"
)

// Environment variables serve reads its credentials from when the flags are
// not given: secrets in flags show up in process listings.
const (
	dashboardTokenEnv     = "LEASEHOLD_DASHBOARD_TOKEN"
	dashboardBasicAuthEnv = "LEASEHOLD_DASHBOARD_BASIC_AUTH"
)

// serveOptions are serve's flags.
type serveOptions struct {
	addr, token, basicAuth string
	readOnly               bool
	secureCookies          bool
	sessionTTL             time.Duration
	// shutdownTimeout bounds the wait for open requests at shutdown.
	shutdownTimeout time.Duration
}

func newServeCmd(g *globalOptions) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the web dashboard, /metrics and /healthz",
		Long: `serve runs the dashboard at /, Prometheus metrics at /metrics and a health
check at /healthz (200 when the database answers, else 503). It runs no
workers: the dashboard reads the jobs and its actions (retry, cancel,
discard, resolve) change them in the database.

Authentication is a bearer token (--token or ` + dashboardTokenEnv + `,
at least 16 bytes: openssl rand -hex 16) or HTTP basic auth (--basic-auth
user:pass or ` + dashboardBasicAuthEnv + `); prefer the environment, since
flags show in process listings. It protects the dashboard and /metrics;
/healthz stays open for probes. With a token, a browser is sent to a login
page that takes the token once and keeps the browser signed in with a
session cookie for --session-ttl; scripts send "Authorization: Bearer".
Behind an HTTPS proxy, add --secure-cookies. serve refuses to listen on an
address other hosts can reach without authentication. --read-only hides
the actions and refuses every POST.

It stops gracefully on SIGINT or SIGTERM.`,
		Example: `  leasehold serve
  LEASEHOLD_DASHBOARD_TOKEN=s3cret leasehold serve --addr 0.0.0.0:8080 --read-only
  leasehold serve --addr 127.0.0.1:9090 --database-url postgres://app@db:5432/app`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runServe(cmd, g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address, host:port (port 0 picks a free one)")
	f.BoolVar(&o.readOnly, "read-only", false, "hide the dashboard's actions and refuse every POST")
	f.StringVar(&o.token, "token", "", "bearer token required on every request (env "+dashboardTokenEnv+")")
	f.StringVar(&o.basicAuth, "basic-auth", "", "user:pass for HTTP basic auth (env "+dashboardBasicAuthEnv+")")
	f.DurationVar(&o.sessionTTL, "session-ttl", dashboard.DefaultSessionTTL, "how long a browser stays signed in after the login page")
	f.BoolVar(&o.secureCookies, "secure-cookies", false, "mark the session cookie Secure on plain HTTP too (behind an HTTPS proxy)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "wait this long for open requests when stopping")
	return cmd
}

// dashboardOptions builds the dashboard's options from the flags and the
// environment.
func (o *serveOptions) dashboardOptions(cmd *cobra.Command) (*dashboard.Options, error) {
	var from string // which flag or variable a value came from, for errors
	opts := &dashboard.Options{
		ReadOnly: o.readOnly, SessionTTL: o.sessionTTL, SecureCookies: o.secureCookies,
		Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil)),
	}
	opts.BearerToken, from = o.token, "--token"
	if opts.BearerToken == "" {
		opts.BearerToken, from = os.Getenv(dashboardTokenEnv), dashboardTokenEnv
	}
	if n := len(opts.BearerToken); n > 0 && n < dashboard.MinTokenLen {
		return nil, fmt.Errorf("%s is %d bytes: use at least %d (a random one: openssl rand -hex 16)", from, n, dashboard.MinTokenLen)
	}
	if o.sessionTTL < time.Minute {
		return nil, fmt.Errorf("--session-ttl %s is below 1m", o.sessionTTL)
	}
	basic := o.basicAuth
	from = "--basic-auth"
	if basic == "" {
		basic, from = os.Getenv(dashboardBasicAuthEnv), dashboardBasicAuthEnv
	}
	if basic != "" {
		user, pass, ok := strings.Cut(basic, ":")
		if !ok || user == "" || pass == "" {
			return nil, fmt.Errorf("%s must be user:password, both non-empty", from)
		}
		opts.BasicAuth = &dashboard.BasicAuth{Username: user, Password: pass}
	}
	return opts, nil
}

func runServe(cmd *cobra.Command, g *globalOptions, o *serveOptions) error {
	opts, err := o.dashboardOptions(cmd)
	if err != nil {
		return err
	}
	// Check before opening anything: a refused address is a setup error.
	if err := dashboard.ListenCheck(o.addr, opts.HasAuth()); err != nil {
		return err
	}
	s, err := g.open(cmd, openOptions{})
	if err != nil {
		return err
	}
	defer s.Close()

	dash, err := dashboard.New(s.client, opts)
	if err != nil {
		return err
	}
	metrics := leaseholdprom.New(nil)
	metrics.Bind(s.client)
	mux := http.NewServeMux()
	mux.Handle("/", dash)
	mux.Handle("/metrics", requireAuth(opts, metrics.Handler()))
	mux.Handle("/healthz", leaseholdprom.Healthz(s.client, 0))

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	mode := "actions enabled"
	if opts.ReadOnly {
		mode = "read-only"
	}
	auth := "no authentication (loopback only)"
	switch {
	case opts.BearerToken != "" && opts.BasicAuth != nil:
		auth = "bearer token or basic auth"
	case opts.BearerToken != "":
		auth = "bearer token"
	case opts.BasicAuth != nil:
		auth = "basic auth"
	}
	base, every := bannerURL(o.addr, ln.Addr())
	if every {
		auth += "; listening on every interface"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "serving %s on %s/ (%s, %s); metrics at %s/metrics, health at %s/healthz\n",
		s.db.URL, base, mode, auth, base, base)

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-cmd.Context().Done():
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// bannerURL is the URL to print for a listener asked for at addr: the
// address it was asked for (a host name stays a name), with the port it got;
// for a wildcard (":8080", "0.0.0.0:8080", "[::]:8080") a loopback address a
// browser on this machine can open, and every reports that other hosts can
// reach it too.
func bannerURL(addr string, got net.Addr) (url string, every bool) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = ""
	}
	port := ""
	if tcp, ok := got.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	} else if _, p, err := net.SplitHostPort(got.String()); err == nil {
		port = p
	}
	switch ip := net.ParseIP(host); {
	case host == "" || (ip != nil && ip.Equal(net.IPv4zero)):
		host, every = "127.0.0.1", true
	case ip != nil && ip.Equal(net.IPv6unspecified):
		host, every = "::1", true
	}
	return "http://" + net.JoinHostPort(host, port), every
}

// requireAuth guards next with the dashboard's credentials, when any are
// set, so that /metrics is no more open than the dashboard: the bearer
// token, basic auth, or the session cookie of the dashboard's login page.
func requireAuth(opts *dashboard.Options, next http.Handler) http.Handler {
	if !opts.HasAuth() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if opts.Authenticate(r) {
			next.ServeHTTP(w, r)
			return
		}
		if opts.BasicAuth != nil {
			w.Header().Set("WWW-Authenticate", `Basic realm="leasehold", charset="UTF-8"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="leasehold"`)
		}
		http.Error(w, "authentication required", http.StatusUnauthorized)
	})
}
