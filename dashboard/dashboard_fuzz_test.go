package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/internal/sqlitetest"
)

type fuzzArgs struct {
	To string `json:"to"`
}

func (fuzzArgs) Kind() string { return "email" }

// FuzzDashboardRequests sends the dashboard on SQLite fuzzed paths, query
// parameters and forms, GETs and POSTs with a valid CSRF token: it must
// never panic and never answer 500.
func FuzzDashboardRequests(f *testing.F) {
	for _, s := range [][4]string{
		{"GET", "/jobs", "state=stuck&kind=charge&queue=payments&before=10&limit=50", ""},
		{"GET", "/jobs", "state=nope&limit=-1&before=abc", ""},
		{"GET", "/jobs", "limit=99999999999999999999&before=-9223372036854775808", ""},
		{"GET", "/jobs/1", "", ""},
		{"GET", "/jobs/0", "", ""},
		{"GET", "/jobs/-1", "", ""},
		{"GET", "/jobs/9223372036854775807", "", ""},
		{"GET", "/jobs/1e3", "", ""},
		{"GET", "/running", "queue=%00", ""},
		{"GET", "/stuck", "kind=%ff%fe", ""},
		{"GET", "/", "refresh=1&partial=1", ""},
		{"GET", "/static/../../etc/passwd", "", ""},
		{"POST", "/jobs/1/retry", "", "next=/jobs/1"},
		{"POST", "/jobs/2/cancel", "", "next=https://evil.example/"},
		{"POST", "/jobs/3/discard", "", "next=//evil.example"},
		{"POST", "/jobs/1/resolve", "", "as=succeeded&note=%3Cscript%3E"},
		{"POST", "/jobs/1/resolve", "", "as=bogus"},
		{"POST", "/jobs/abc/retry", "", ""},
		{"POST", "/jobs/1/explode", "", ""},
		{"POST", "/queues/default/pause", "", "next=/"},
		{"POST", "/queues/default/resume", "", ""},
		{"POST", "/queues/bad%20name/pause", "", ""},
		{"POST", "/queues/" + strings.Repeat("q", 200) + "/pause", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	ctx := context.Background()
	d, _ := sqlitetest.Open(f)
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	for i, to := range []string{"a@example.com", "<script>x</script>", "\u202e", "b"} {
		res, err := c.Insert(ctx, fuzzArgs{To: to}, &leasehold.InsertOpts{Queue: []string{"default", "payments"}[i%2]})
		if err != nil {
			f.Fatal(err)
		}
		if i == 3 {
			if _, err := c.JobCancel(ctx, res.Job.ID); err != nil {
				f.Fatal(err)
			}
		}
	}
	h, err := dashboard.New(c, nil)
	if err != nil {
		f.Fatal(err)
	}
	// A CSRF cookie from a first page view, submitted back as a browser would.
	first := httptest.NewRecorder()
	h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/", nil))
	var csrf *http.Cookie
	for _, ck := range first.Result().Cookies() {
		if ck.Name == "leasehold_csrf" {
			csrf = ck
		}
	}
	if csrf == nil {
		f.Fatal("the overview set no CSRF cookie")
	}

	f.Fuzz(func(t *testing.T, method, path, query, form string) {
		if method != http.MethodPost {
			method = http.MethodGet
		}
		u := &url.URL{Scheme: "http", Host: "dashboard.test", Path: path, RawQuery: query}
		if !strings.HasPrefix(path, "/") {
			u.Path = "/" + path
		}
		var body *strings.Reader
		if method == http.MethodPost {
			values, err := url.ParseQuery(form)
			if err != nil {
				values = url.Values{"raw": {form}}
			}
			values.Set("csrf", csrf.Value)
			body = strings.NewReader(values.Encode())
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequest(method, u.String(), body)
		if err != nil {
			return // not a request a client could send
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.AddCookie(csrf)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s answered %d: %s", method, u, rec.Code, truncateBody(rec.Body.String()))
		}
	})
}

func truncateBody(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
