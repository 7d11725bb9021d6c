package dashboard

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Source is what the dashboard reads and changes. *leasehold.Client
// satisfies it for every transaction type; tests may pass their own.
type Source interface {
	// JobList lists jobs, newest first.
	JobList(ctx context.Context, params *leasehold.JobListParams) ([]*leasetype.JobRow, error)
	// JobGet returns one job, or an error wrapping leasehold.ErrNotFound.
	JobGet(ctx context.Context, id int64) (*leasetype.JobRow, error)
	// JobAttempts returns a job's attempt history, oldest first.
	JobAttempts(ctx context.Context, id int64) ([]*leasetype.AttemptRow, error)
	// JobCounts counts jobs per queue and state.
	JobCounts(ctx context.Context) ([]*leasetype.QueueStateCount, error)
	// JobRetry makes a job that is not running available now.
	JobRetry(ctx context.Context, id int64) (*leasetype.JobRow, error)
	// JobCancel cancels a waiting or stuck job, and asks for the
	// cancellation of a running one: the row it returns is then still
	// running, with CancelRequestedAt set.
	JobCancel(ctx context.Context, id int64) (*leasetype.JobRow, error)
	// JobDiscard discards a waiting or stuck job.
	JobDiscard(ctx context.Context, id int64) (*leasetype.JobRow, error)
	// ResolveStuck settles a stuck job after reconciliation.
	ResolveStuck(ctx context.Context, id int64, as leasehold.Resolution, note string) (*leasetype.JobRow, error)
	// JobThroughput counts the attempts that ended since a time, per queue,
	// minute and outcome.
	JobThroughput(ctx context.Context, since time.Time) ([]*leasetype.ThroughputCount, error)
	// QueueBacklog returns each queue's claimable jobs and the age of the
	// oldest, on the database clock.
	QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error)
	// QueuePause stops every client from claiming a queue's jobs.
	QueuePause(ctx context.Context, name string) error
	// QueueResume lets clients claim a paused queue's jobs again.
	QueueResume(ctx context.Context, name string) error
	// QueueList returns the control state of every queue ever paused or
	// resumed, in name order; other queues are active.
	QueueList(ctx context.Context) ([]*leasehold.QueueInfo, error)
	// PeriodicSchedules returns the periodic schedules stored in the
	// database, in name order.
	PeriodicSchedules(ctx context.Context) ([]*leasetype.PeriodicSchedule, error)
	// Clients returns the fleet's working clients from the client
	// registry, in owner order.
	Clients(ctx context.Context) ([]*leasetype.ClientRow, error)
	// KeyStats reports the flow-control keys with the most waiting jobs
	// and a per-queue summary of keys.
	KeyStats(ctx context.Context, params *leasehold.KeyStatsParams) (*driver.KeyStatsResult, error)
	// SequencesBlocked lists the sequences held up by a discarded,
	// cancelled or stuck job.
	SequencesBlocked(ctx context.Context, params *leasehold.SequencesBlockedParams) ([]*driver.SequenceBlockedRow, error)
	// AuditList returns the audit trail of operator actions, newest first.
	AuditList(ctx context.Context, params *leasehold.AuditListParams) ([]*leasetype.AuditRow, error)
	// JobBulkCount counts the jobs a bulk action would act on.
	JobBulkCount(ctx context.Context, params *leasehold.BulkParams) (int64, error)
	// JobBulk applies a bulk action in batches, each audited.
	JobBulk(ctx context.Context, params *leasehold.BulkParams) (*leasehold.BulkResult, error)
}

// BasicAuth is a user name and password for HTTP basic authentication.
type BasicAuth struct {
	// Username is the expected user name.
	Username string
	// Password is the expected password.
	Password string
}

// Options configure the dashboard. The zero value serves at the root of the
// mount, without authentication, with actions enabled.
type Options struct {
	// BasePath is the path the handler is mounted under, as seen by the
	// browser ("/leasehold"), used to build links. Empty means: found from
	// each request, which works when the handler is mounted with
	// http.StripPrefix.
	BasePath string
	// BearerToken, when set, is accepted in an "Authorization: Bearer"
	// header, and on the login page ({BasePath}/login), which gives the
	// browser a session cookie: browsers asking for a page without
	// credentials are sent there, other requests get 401. Requests need it
	// or BasicAuth when either is set. It must be at least MinTokenLen
	// bytes; a random one: openssl rand -hex 16.
	BearerToken string
	// SessionTTL is how long a browser stays signed in after entering the
	// bearer token on the login page; default DefaultSessionTTL (12 h).
	// The session cookie is signed with a key derived from the token:
	// changing the token signs every browser out.
	SessionTTL time.Duration
	// SecureCookies marks the session and CSRF cookies Secure on every
	// response, not only on requests that came over TLS: set it when a
	// proxy terminates TLS in front of the dashboard. Leave it off to sign
	// in over plain HTTP (on loopback), where a Secure cookie is not kept.
	SecureCookies bool
	// BasicAuth, when set, is accepted as HTTP basic authentication; browsers
	// prompt for it.
	BasicAuth *BasicAuth
	// ReadOnly hides every action and refuses every POST with 403.
	ReadOnly bool
	// RefreshInterval is how often the open page refreshes its content;
	// default 5 s. Negative turns live refresh off.
	RefreshInterval time.Duration
	// Logger receives errors the dashboard could not show; default discards.
	Logger *slog.Logger
}

// HasAuth reports whether the options require authentication.
func (o *Options) HasAuth() bool {
	return o != nil && (o.BearerToken != "" || o.BasicAuth != nil)
}

// handler is the dashboard. Its only mutable state is the count of failed
// sign-ins: the CSRF secret and the session live in each browser's cookies.
type handler struct {
	src        Source
	opts       Options
	sessionKey []byte // derived from the bearer token; nil without one
	limiter    loginLimiter
	mux        *http.ServeMux
	pages      map[string]*template.Template
	assetHash  map[string]string // static file name -> short content hash, to bust caches
	cop        *http.CrossOriginProtection
	now        func() time.Time
}

// New returns the dashboard for src. opts may be nil; it is copied, never
// changed.
func New(src Source, opts *Options) (http.Handler, error) {
	if src == nil {
		return nil, errors.New("dashboard: source is nil")
	}
	h := &handler{src: src, cop: http.NewCrossOriginProtection(), now: time.Now}
	if opts != nil {
		h.opts = *opts
	}
	if err := h.defaults(); err != nil {
		return nil, err
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	if err := h.hashAssets(); err != nil {
		return nil, err
	}
	h.routes()
	return h, nil
}

func (h *handler) defaults() error {
	o := &h.opts
	if o.BasePath != "" {
		if !strings.HasPrefix(o.BasePath, "/") || strings.HasPrefix(o.BasePath, "//") {
			return fmt.Errorf("dashboard: base path %q must start with a single /", o.BasePath)
		}
		if strings.ContainsAny(o.BasePath, "?#\"'<> ") {
			return fmt.Errorf("dashboard: base path %q must be a plain path", o.BasePath)
		}
		o.BasePath = strings.TrimRight(o.BasePath, "/")
	}
	if o.BearerToken != "" && len(o.BearerToken) < MinTokenLen {
		return fmt.Errorf("dashboard: the bearer token is %d bytes; use at least %d (a random one: openssl rand -hex 16)", len(o.BearerToken), MinTokenLen)
	}
	if o.BearerToken != strings.TrimSpace(o.BearerToken) {
		return errors.New("dashboard: the bearer token starts or ends with white space")
	}
	if o.SessionTTL < 0 || (o.SessionTTL > 0 && o.SessionTTL < time.Minute) {
		return fmt.Errorf("dashboard: session TTL %s is below 1m", o.SessionTTL)
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.BearerToken != "" {
		h.sessionKey = sessionKey(o.BearerToken)
	}
	if o.BasicAuth != nil && (o.BasicAuth.Username == "" || o.BasicAuth.Password == "") {
		return errors.New("dashboard: basic auth needs a user name and a password")
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = 5 * time.Second
	}
	if o.RefreshInterval > 0 && o.RefreshInterval < time.Second {
		return fmt.Errorf("dashboard: refresh interval %s is below 1s", o.RefreshInterval)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (h *handler) hashAssets() error {
	h.assetHash = map[string]string{}
	entries, err := fs.ReadDir(assets, "static")
	if err != nil {
		return fmt.Errorf("dashboard: read assets: %w", err)
	}
	for _, e := range entries {
		b, err := assets.ReadFile("static/" + e.Name())
		if err != nil {
			return fmt.Errorf("dashboard: read asset %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		h.assetHash[e.Name()] = hex.EncodeToString(sum[:6])
	}
	return nil
}

func (h *handler) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", h.page(h.overview))
	m.HandleFunc("GET /jobs", h.page(h.jobs))
	m.HandleFunc("GET /jobs/{id}", h.page(h.job))
	m.HandleFunc("GET /graphs/{id}", h.page(h.graph))
	m.HandleFunc("POST /graphs/{id}/cancel", h.graphCancel)
	m.HandleFunc("GET /running", h.page(h.running))
	m.HandleFunc("GET /stuck", h.page(h.stuck))
	m.HandleFunc("GET /schedules", h.page(h.schedules))
	m.HandleFunc("GET /static/{name}", h.static)
	m.HandleFunc("GET "+loginPath, h.login)
	m.HandleFunc("POST "+loginPath, h.login)
	m.HandleFunc("POST /logout", h.logout)
	m.HandleFunc("GET /discarded", h.page(h.discarded))
	m.HandleFunc("POST /jobs/{id}/{action}", h.action)
	m.HandleFunc("GET /audit", h.page(h.audit))
	m.HandleFunc("GET /clients", h.page(h.clients))
	m.HandleFunc("GET /keys", h.page(h.keys))
	m.HandleFunc("GET /bulk", h.page(h.bulkConfirm))
	m.HandleFunc("POST /bulk", h.bulkPost)
	// A queue name may hold "/": forms escape it as %2F, which the mux
	// keeps inside the one segment.
	m.HandleFunc("POST /queues/{queue}/{action}", h.queueAction)
	m.HandleFunc("/", h.notFound)
	h.mux = m
}

// ServeHTTP authenticates the request, sets the security headers and routes it.
// The login page, sign-out and the static assets (the public style sheet,
// script and icon the login page needs) are served without credentials.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if ok, _ := h.opts.authenticate(r, h.now()); !ok && !public(r) {
		if h.opts.BearerToken != "" && wantsPage(r) {
			h.toLogin(w, r)
			return
		}
		h.challenge(w)
		return
	}
	r = h.withActor(r) // who acts, for the audit trail
	if r.URL.Path == "" {
		// Mounted with StripPrefix and asked for the prefix itself.
		http.Redirect(w, r, h.base(r)+"/", http.StatusFound)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// public reports whether a request needs no credentials.
func public(r *http.Request) bool {
	p := r.URL.Path
	return p == loginPath || (p == "/logout" && r.Method == http.MethodPost) ||
		(strings.HasPrefix(p, "/static/") && (r.Method == http.MethodGet || r.Method == http.MethodHead))
}

// base returns the path the handler is mounted under, without a trailing
// slash: Options.BasePath, else what http.StripPrefix removed.
func (h *handler) base(r *http.Request) string {
	if h.opts.BasePath != "" {
		return h.opts.BasePath
	}
	full := r.RequestURI
	if i := strings.IndexAny(full, "?#"); i >= 0 {
		full = full[:i]
	}
	if strings.HasPrefix(full, "http://") || strings.HasPrefix(full, "https://") {
		return "" // a proxy-style absolute request URI; links stay at the root
	}
	rest := r.URL.EscapedPath()
	if r.URL.Path == "" {
		rest = ""
	}
	if !strings.HasSuffix(full, rest) {
		return ""
	}
	prefix := strings.TrimRight(strings.TrimSuffix(full, rest), "/")
	if strings.HasPrefix(prefix, "//") || strings.ContainsAny(prefix, "\"'<> ") {
		return ""
	}
	return prefix
}

func (h *handler) static(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, ok := h.assetHash[name]; !ok {
		h.notFound(w, r)
		return
	}
	b, err := assets.ReadFile("static/" + name)
	if err != nil {
		h.notFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		w.Header().Set("Content-Type", "application/octet-stream")
	}
	// Links carry the content hash, so a cached copy is never stale.
	if r.URL.Query().Get("v") == h.assetHash[name] {
		w.Header().Set("Cache-Control", "private, max-age=86400, immutable")
	} else {
		w.Header().Set("Cache-Control", "no-cache")
	}
	_, _ = w.Write(b)
}
