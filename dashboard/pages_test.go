package dashboard_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestOverview(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		res := e.get("/")
		if res.code != http.StatusOK {
			t.Fatalf("GET / = %d:\n%s", res.code, res.body)
		}
		mustContain(t, "overview", res.body,
			`<title>Overview · Leasehold</title>`,
			`href="/jobs?queue=default"`, `href="/jobs?queue=payments"`, `href="/jobs?queue=reports"`,
			// default: one completed, one retryable, two available.
			`st-available" href="/jobs?queue=default&amp;state=available">2</a>`,
			`st-completed" href="/jobs?queue=default&amp;state=completed">1</a>`,
			`st-stuck" href="/jobs?queue=payments&amp;state=stuck">1</a>`,
			`st-running" href="/jobs?queue=payments&amp;state=running">1</a>`,
			// the throughput chart: one completion, one failure, one expiry
			`<svg class="chart"`, `<svg class="chart spark"`,
			`completed <b>1</b>`, `failed <b>1</b>`, `lease expired <b>1</b>`,
			"Clients alive", `href="/clients"`,
			`src="/static/app.js?v=`, `href="/static/app.css?v=`,
		)
		// The default queue has two claimable jobs; the reports job is not due.
		row := regexp.MustCompile(`(?s)<tr>\s*<td><a class="mono" href="/jobs\?queue=default">default</a></td>.*?</tr>`).FindString(res.body)
		if m := regexp.MustCompile(`<td class="num claimable">([^<]*)</td>`).FindStringSubmatch(row); m == nil || m[1] != "2" {
			t.Errorf("default queue row: want 2 claimable, got %q in\n%s", m, row)
		}
	})
}

func TestOverviewEmpty(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		res := e.get("/")
		if res.code != http.StatusOK {
			t.Fatalf("GET / = %d", res.code)
		}
		mustContain(t, "empty overview", res.body, "No jobs yet.", `completed <b>0</b>`)
	})
}

// ids returns the job IDs linked from a job table.
func ids(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<a class="mono[^"]*" href="/jobs/(\d+)">`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func TestJobsFilters(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		all := []int64{s.scheduled, s.xssKind, s.available, s.stuck, s.running, s.retryable, s.completed}
		for _, tc := range []struct {
			query string
			want  []int64
		}{
			{"", all},
			{"?state=completed", []int64{s.completed}},
			{"?state=running", []int64{s.running}},
			{"?state=stuck", []int64{s.stuck}},
			{"?state=available&state=scheduled", []int64{s.scheduled, s.xssKind, s.available}},
			{"?state=available,retryable", []int64{s.xssKind, s.available, s.retryable}},
			{"?state=", all},
			{"?queue=payments", []int64{s.stuck, s.running}},
			{"?queue=nope", nil},
			{"?kind=charge", []int64{s.stuck, s.running}},
			{"?kind=charge&state=running", []int64{s.running}},
			{"?unique_key=" + stuckKey, []int64{s.stuck}},
			{fmt.Sprintf("?id=%d", s.running), []int64{s.running}},
			{fmt.Sprintf("?id=%%23%d", s.running), []int64{s.running}}, // "#12" as copied from a page
			{fmt.Sprintf("?id=%d&state=completed", s.running), nil},
			{"?id=999999", nil},
			{fmt.Sprintf("?before=%d", s.running), []int64{s.retryable, s.completed}},
			{"?limit=2", []int64{s.scheduled, s.xssKind}},
		} {
			res := e.get("/jobs" + tc.query)
			if res.code != http.StatusOK {
				t.Errorf("GET /jobs%s = %d", tc.query, res.code)
				continue
			}
			want := []string{}
			for _, id := range tc.want {
				want = append(want, fmt.Sprint(id))
			}
			if got := ids(res.body); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("GET /jobs%s: jobs %v, want %v", tc.query, got, want)
			}
			if len(tc.want) == 0 && !strings.Contains(res.body, "No jobs match.") {
				t.Errorf("GET /jobs%s: no empty-table message", tc.query)
			}
		}
		// The filter form keeps what was asked.
		res := e.get("/jobs?state=stuck&queue=payments&kind=charge&unique_key=" + stuckKey)
		mustContain(t, "filter form", res.body, `<option value="stuck" selected>`, `name="queue" value="payments"`,
			`name="kind" value="charge"`, `name="unique_key" value="`+stuckKey+`"`)
	})
}

func TestJobsPaging(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		res := e.get("/jobs?limit=3")
		next := regexp.MustCompile(`<a href="\?([^"]*)">Older »</a>`).FindStringSubmatch(res.body)
		if next == nil {
			t.Fatalf("first page has no Older link:\n%s", res.body)
		}
		page2 := strings.ReplaceAll(next[1], "&amp;", "&")
		if want := fmt.Sprintf("before=%d&limit=3", s.available); page2 != want {
			t.Fatalf("Older link %q, want %q", page2, want)
		}
		res = e.get("/jobs?" + page2)
		if got, want := ids(res.body), []string{fmt.Sprint(s.stuck), fmt.Sprint(s.running), fmt.Sprint(s.retryable)}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("second page %v, want %v", got, want)
		}
		mustContain(t, "second page", res.body, `« Newest</a>`, "Older »")
		res = e.get(fmt.Sprintf("/jobs?before=%d&limit=3", s.retryable))
		if got := ids(res.body); len(got) != 1 || strings.Contains(res.body, "Older »") {
			t.Fatalf("last page: jobs %v, Older link present: %v", got, strings.Contains(res.body, "Older »"))
		}
	})
}

func TestJobDetail(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		res := e.get(fmt.Sprintf("/jobs/%d", s.completed))
		if res.code != http.StatusOK {
			t.Fatalf("GET job = %d:\n%s", res.code, res.body)
		}
		j := e.job(s.completed)
		mustContain(t, "completed job", res.body,
			fmt.Sprintf(`<title>Job %d · Leasehold</title>`, s.completed),
			`<span class="badge st-completed">completed</span>`,
			"<pre class=\"json\">{\n  &#34;", "  &#34;to&#34;: &#34;a@example.com&#34;", "  &#34;n&#34;: 1", // pretty JSON args
			"&#34;trace&#34;: &#34;t-1&#34;", // metadata
			`<svg class="timeline"`, `class="held oc-completed"`, `class="window"`,
			`<span class="badge oc-completed">completed</span>`,
			testOwner, fmt.Sprintf(`<td class="num mono opt">%d</td>`, j.LeaseToken),
			fmt.Sprintf("email:%d", s.completed), // the idempotency key
			`action="/jobs/`+fmt.Sprint(s.completed)+`/retry"`,
		)
		mustNotContain(t, "completed job", res.body, "/cancel\"", "/discard\"", "/resolve\"")

		res = e.get(fmt.Sprintf("/jobs/%d", s.running))
		mustContain(t, "running job", res.body, "Current lease", `class="held oc-running"`, `<span class="badge oc-running">running</span>`, " left</span>")
		mustContain(t, "running job", res.body, `action="/jobs/`+fmt.Sprint(s.running)+`/cancel"`)
		mustNotContain(t, "running job", res.body, "/retry\"", "/discard\"", "/resolve\"")

		res = e.get(fmt.Sprintf("/jobs/%d", s.stuck))
		mustContain(t, "stuck job", res.body, `class="held oc-expired"`, "lease_expired", "/cancel\"", "/discard\"",
			`action="/jobs/`+fmt.Sprint(s.stuck)+`/resolve"`, `value="succeeded"`, `value="failed"`, `value="retry"`, stuckKey)
		// Resolving is the way out: no bare Retry competes with it.
		mustNotContain(t, "stuck job", res.body, "/retry\"")

		res = e.get(fmt.Sprintf("/jobs/%d", s.available))
		mustContain(t, "available job", res.body, "No lease has ended yet.", "/cancel\"", "/discard\"")
		mustNotContain(t, "available job", res.body, "/retry\"")
	})
}

func TestRunningAndStuckPages(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		s := e.seed()
		res := e.get("/running")
		if res.code != http.StatusOK {
			t.Fatalf("GET /running = %d", res.code)
		}
		if got := ids(res.body); len(got) != 1 || got[0] != fmt.Sprint(s.running) {
			t.Fatalf("running jobs %v, want [%d]", got, s.running)
		}
		// A five-minute lease just granted has 4 or 5 minutes left.
		if !regexp.MustCompile(`<td class="num left ">[45]m \d+s</td>`).MatchString(res.body) {
			t.Errorf("running page shows no lease time left:\n%s", res.body)
		}
		mustContain(t, "running", res.body, testOwner)

		res = e.get("/stuck")
		if res.code != http.StatusOK {
			t.Fatalf("GET /stuck = %d", res.code)
		}
		if got := ids(res.body); len(got) != 1 || got[0] != fmt.Sprint(s.stuck) {
			t.Fatalf("stuck jobs %v, want [%d]", got, s.stuck)
		}
		id := fmt.Sprint(s.stuck)
		mustContain(t, "stuck", res.body, `action="/jobs/`+id+`/cancel"`,
			`action="/jobs/`+id+`/resolve"`, `name="note"`, `name="next" value="/stuck"`, testOwner, stuckKey,
			// the resolve actions carry the weight: filled buttons, first
			`value="succeeded" class="btn ok solid"`, `value="failed" class="btn danger solid"`, `value="retry" class="btn plain"`)
		mustNotContain(t, "stuck", res.body, `action="/jobs/`+id+`/retry"`, `class="btn " data-confirm`)
		if strings.Index(res.body, `/resolve"`) > strings.Index(res.body, `/cancel"`) {
			t.Error("on the stuck page Cancel comes before the resolve actions")
		}
	})
}

func TestFragment(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		for _, path := range []string{"/", "/jobs", "/running", "/stuck", "/schedules"} {
			r := newGet(path)
			r.Header.Set("X-Leasehold-Fragment", "1")
			res := do(t, e.h, r)
			if res.code != http.StatusOK {
				t.Fatalf("fragment %s = %d", path, res.code)
			}
			if strings.Contains(res.body, "<html") || strings.Contains(res.body, "<main") {
				t.Errorf("fragment %s holds the layout", path)
			}
			if !strings.Contains(res.body, "<h1>") || !strings.Contains(res.body, "As of ") {
				t.Errorf("fragment %s lacks the content:\n%s", path, res.body)
			}
			if !strings.Contains(res.hdr.Get("Vary"), "X-Leasehold-Fragment") {
				t.Errorf("fragment %s: Vary %q", path, res.hdr.Get("Vary"))
			}
		}
		full := e.get("/")
		mustContain(t, "full page", full.body, `<main id="live">`, `data-refresh="5000"`)
	})
}

func TestBadParams(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		e.seed()
		for _, tc := range []struct {
			path string
			code int
			msg  string
		}{
			{"/jobs?id=abc", 400, "id &#34;abc&#34; is not a job ID"},
			{"/jobs?id=-3", 400, "is not a job ID"},
			{"/jobs?id=99999999999999999999", 400, "is not a job ID"},
			{"/jobs?state=bogus", 400, "unknown state &#34;bogus&#34;"},
			{"/jobs?state=running,bogus", 400, "unknown state"},
			{"/jobs?before=x", 400, "before &#34;x&#34; is not a job ID"},
			{"/jobs?limit=0", 400, "limit"},
			{"/jobs?limit=100000", 400, "limit"},
			{"/jobs?limit=ten", 400, "limit"},
			{"/jobs?queue=" + strings.Repeat("q", 600), 400, "queue is longer"},
			{"/jobs/abc", 400, "job ID &#34;abc&#34; is not a job ID"},
			{"/jobs/0", 400, "is not a job ID"},
			{"/jobs/999999", 404, "not found"},
			{"/running?state=stuck", 400, "this page lists running jobs"},
			{"/stuck?limit=-1", 400, "limit"},
			{"/nope", 404, "no such page"},
			{"/static/nope.js", 404, "no such page"},
		} {
			res := e.get(tc.path)
			if res.code != tc.code {
				t.Errorf("GET %s = %d, want %d:\n%s", tc.path, res.code, tc.code, res.body)
				continue
			}
			if !strings.Contains(res.body, tc.msg) {
				t.Errorf("GET %s: page does not say %q:\n%s", tc.path, tc.msg, res.body)
			}
			if ct := res.hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("GET %s: Content-Type %q", tc.path, ct)
			}
		}
	})
}

func newGet(path string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, path, nil)
	r.RequestURI = path
	return r
}
