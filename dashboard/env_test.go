package dashboard_test

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/internal/sqlitetest"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/postgres"
)

// The client satisfies Source for both backends' transaction types.
var (
	_ dashboard.Source = (*leasehold.Client[*sql.Tx])(nil)
	_ dashboard.Source = (*leasehold.Client[pgx.Tx])(nil)
)

// env is a dashboard on a fresh database.
type env struct {
	t      *testing.T
	client dashboard.Source
	exec   driver.Executor
	h      http.Handler
}

// onBoth runs fn on SQLite and on Postgres, as parallel subtests, each with
// a fresh database.
func onBoth(t *testing.T, fn func(t *testing.T, e *env)) {
	t.Parallel()
	t.Run("SQLite", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, newSQLite(t)))
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, newEnv(t, newPostgres(t)))
	})
}

func newSQLite(t *testing.T) driver.Driver[*sql.Tx] {
	t.Helper()
	d, _ := sqlitetest.Open(t)
	return d
}

// newPostgres returns a driver on a fresh, migrated schema, dropped when the
// test ends. It fails the test, never skips it, when the server cannot be
// reached.
func newPostgres(t *testing.T) driver.Driver[pgx.Tx] {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t, "lhdash_", 4)
	d := postgres.New(pool)
	if _, err := migrate.New(d).Up(ctx); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return d
}

func newEnv[TTx any](t *testing.T, d driver.Driver[TTx]) *env {
	t.Helper()
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	e := &env{t: t, client: c, exec: d.GetExecutor()}
	e.h = e.handler(nil)
	return e
}

func (e *env) handler(opts *dashboard.Options) http.Handler {
	e.t.Helper()
	h, err := dashboard.New(e.client, opts)
	if err != nil {
		e.t.Fatalf("dashboard.New: %v", err)
	}
	return h
}

// seeded are the jobs seed makes, one per interesting state.
type seeded struct {
	completed, retryable, running, stuck, available, xssKind, scheduled int64
}

const (
	testOwner  = "testhost:4242:dash"
	xssArgs    = `{"to":"<script>alert('args')</script>"}`
	xssKind    = `<script>alert("kind")</script>`
	xssError   = `smtp said <script>alert("error")</script>`
	stuckKey   = "pay-42"
	chargeKind = "charge"
)

// seed fills the database: a completed job with its attempt, a failed one
// waiting for a retry, a running one, a stuck one, and waiting ones whose
// args and kind hold markup.
func (e *env) seed() seeded {
	e.t.Helper()
	var s seeded
	s.completed = e.insert("email", "default", `{"to":"a@example.com","n":1}`, "", nil)
	e.claimOne("default", time.Minute, nil, s.completed)
	e.finish(s.completed, leasetype.JobStateCompleted, leasetype.OutcomeCompleted, "", nil)

	s.retryable = e.insert("email", "default", `{"to":"b@example.com"}`, "", nil)
	e.claimOne("default", time.Minute, nil, s.retryable)
	later := time.Now().Add(time.Hour)
	e.finish(s.retryable, leasetype.JobStateRetryable, leasetype.OutcomeFailed, xssError, &later)

	s.running = e.insert(chargeKind, "payments", `{"amount":1200,"currency":"EUR"}`, "", nil)
	e.claimOne("payments", 5*time.Minute, nil, s.running)

	s.stuck = e.insert(chargeKind, "payments", `{"amount":500,"currency":"EUR"}`, stuckKey, nil)
	e.makeStuck(s.stuck)

	s.available = e.insert("email", "default", xssArgs, "", nil)
	s.xssKind = e.insert(xssKind, "default", `{}`, "", nil)
	s.scheduled = e.insert("report", "reports", `{"day":"2025-01-01"}`, "", &later)
	return s
}

func (e *env) insert(kind, queue, args, uniqueKey string, at *time.Time) int64 {
	e.t.Helper()
	res, err := e.exec.JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{{
		Kind: kind, Queue: queue, Priority: 1, EncodedArgs: []byte(args), Metadata: []byte(`{"trace":"t-1"}`),
		UniqueKey: uniqueKey, MaxAttempts: 5, ScheduledAt: at,
	}}})
	if err != nil {
		e.t.Fatalf("insert %s: %v", kind, err)
	}
	return res[0].Job.ID
}

func (e *env) claimOne(queue string, ttl time.Duration, stuckKinds []string, want int64) *leasetype.JobRow {
	e.t.Helper()
	rows, err := e.exec.JobClaim(context.Background(), &driver.JobClaimParams{
		Queue: queue, Max: 1, Owner: testOwner, DefaultLeaseTTL: ttl, StuckKinds: stuckKinds,
	})
	if err != nil {
		e.t.Fatalf("claim %s: %v", queue, err)
	}
	if len(rows) != 1 || rows[0].ID != want {
		e.t.Fatalf("claim %s: got %d rows, want job %d", queue, len(rows), want)
	}
	return rows[0]
}

func (e *env) finish(id int64, state leasetype.JobState, outcome leasetype.AttemptOutcome, errText string, at *time.Time) {
	e.t.Helper()
	job := e.job(id)
	written, err := e.exec.JobFinish(context.Background(), &driver.JobFinishParams{Owner: testOwner, Items: []*driver.JobFinish{{
		ID: id, Token: job.LeaseToken, State: state, Outcome: outcome, Error: errText, ScheduledAt: at, CountError: errText != "",
	}}})
	if err != nil || len(written) != 1 {
		e.t.Fatalf("finish job %d: written %v, %v", id, written, err)
	}
}

// makeStuck leases the job under the stuck policy with a short TTL, lets the
// lease lapse and reclaims it, as the expirer would after a crash.
func (e *env) makeStuck(id int64) {
	e.t.Helper()
	e.claimOne(e.job(id).Queue, 50*time.Millisecond, []string{chargeKind}, id)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := e.exec.JobExpire(context.Background(), &driver.JobExpireParams{Limit: 100}); err != nil {
			e.t.Fatalf("expire: %v", err)
		}
		if e.job(id).State == leasetype.JobStateStuck {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("job %d did not become stuck; it is %s", id, e.job(id).State)
}

func (e *env) job(id int64) *leasetype.JobRow {
	e.t.Helper()
	j, err := e.client.JobGet(context.Background(), id)
	if err != nil {
		e.t.Fatalf("get job %d: %v", id, err)
	}
	return j
}

// response is a finished request.
type response struct {
	code int
	hdr  http.Header
	body string
}

func do(t *testing.T, h http.Handler, r *http.Request) *response {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	b, _ := io.ReadAll(res.Body)
	return &response{code: res.StatusCode, hdr: res.Header, body: string(b)}
}

func (e *env) get(path string) *response {
	e.t.Helper()
	return do(e.t, e.h, httptest.NewRequest(http.MethodGet, path, nil))
}

// session is a browser's CSRF cookie and the token its pages carry.
type session struct {
	cookie *http.Cookie
	token  string
}

var tokenField = regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`)

// session opens a page to get the CSRF cookie and the token in its forms.
func (e *env) session(h http.Handler, page string) *session {
	e.t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, page, nil))
	res := w.Result()
	var s session
	for _, c := range res.Cookies() {
		if c.Name == "leasehold_csrf" {
			s.cookie = c
		}
	}
	if s.cookie == nil {
		e.t.Fatalf("GET %s set no CSRF cookie", page)
	}
	if !s.cookie.HttpOnly || s.cookie.SameSite != http.SameSiteStrictMode {
		e.t.Fatalf("CSRF cookie is not HttpOnly and SameSite=Strict: %+v", s.cookie)
	}
	b, _ := io.ReadAll(res.Body)
	if m := tokenField.FindStringSubmatch(string(b)); m != nil {
		s.token = m[1]
	} else {
		s.token = s.cookie.Value
	}
	return &s
}

// post submits a form as the browser of session s would.
func (e *env) post(h http.Handler, s *session, path string, form url.Values) *response {
	e.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if s != nil && !form.Has("csrf") {
		form.Set("csrf", s.token)
	}
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if s != nil {
		r.AddCookie(s.cookie)
	}
	return do(e.t, h, r)
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q", what, w)
		}
	}
	if t.Failed() {
		t.Logf("%s body:\n%s", what, body)
	}
}

func mustNotContain(t *testing.T, what, body string, bad ...string) {
	t.Helper()
	for _, b := range bad {
		if strings.Contains(body, b) {
			t.Errorf("%s contains %q", what, b)
		}
	}
}
