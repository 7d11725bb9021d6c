package dashboard_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// insertKeyed inserts a job with a flow-control key and a sequence.
func (e *env) insertKeyed(queue, key, sequence string) int64 {
	e.t.Helper()
	res, err := e.exec.JobInsertMany(context.Background(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{{
		Kind: chargeKind, Queue: queue, Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`),
		MaxAttempts: 5, Key: key, Sequence: sequence,
	}}})
	if err != nil {
		e.t.Fatalf("insert keyed job: %v", err)
	}
	return res[0].Job.ID
}

// TestKeysPage: the keys page lists the top keys by waiting jobs with
// their running jobs, the per-queue summary and the blocked sequences, and
// filters by queue; the job page and the jobs table show a job's key and
// sequence, and the jobs page filters by both.
func TestKeysPage(t *testing.T) {
	onBoth(t, func(t *testing.T, e *env) {
		res := e.get("/keys")
		if res.code != http.StatusOK {
			t.Fatalf("GET /keys = %d:\n%s", res.code, res.body)
		}
		mustContain(t, "empty keys page", res.body, `<title>Keys · Leasehold</title>`, `class="active">Keys</a>`,
			"No keyed jobs waiting or running.", "No blocked sequences.")

		for range 3 {
			e.insertKeyed("payments", "cust-1", "")
		}
		running := e.insertKeyed("hold", "<b>cust-2</b>", "")
		e.insertKeyed("hold", "<b>cust-2</b>", "")
		e.claimOne("hold", time.Minute, nil, running)
		head := e.insertKeyed("refunds", "", "pay-7")
		behind := e.insertKeyed("refunds", "", "pay-7")
		e.claimOne("refunds", time.Minute, nil, head)
		e.finish(head, leasetype.JobStateDiscarded, leasetype.OutcomeFailed, "card declined", nil)

		res = e.get("/keys")
		if res.code != http.StatusOK {
			t.Fatalf("GET /keys = %d:\n%s", res.code, res.body)
		}
		row := func(cells ...string) string { return strings.Join(cells, `\s*`) }
		for what, re := range map[string]string{
			"cust-1: 3 waiting, 0 running":      row(`>cust-1</a></td>`, `<td class="num">3</td>`, `<td class="num">0</td>`),
			"cust-2: 1 waiting, 1 running":      row(`>&lt;b&gt;cust-2&lt;/b&gt;</a></td>`, `<td class="num">1</td>`, `<td class="num">1</td>`),
			"payments: 1 key, 3 jobs, max 3":    row(`>payments</a></td>`, `<td class="num">1</td>`, `<td class="num">3</td>`, `<td class="num">3</td>`),
			"pay-7 blocked by the head, 1 wait": row(`>pay-7</a></td>`, `<td class="num"><a class="mono" href="/jobs/`+itoa(head)+`">`+itoa(head)+`</a></td>`, `<td><span class="badge st-discarded">discarded</span></td>`, `<td class="opt">.*?</td>`, `<td class="mono opt">charge</td>`, `<td class="num">1</td>`),
		} {
			if !regexp.MustCompile(re).MatchString(res.body) {
				t.Errorf("keys page lacks %s (%s):\n%s", what, re, res.body)
			}
		}
		if strings.Contains(res.body, "<b>cust-2") {
			t.Error("keys page shows a key unescaped")
		}
		if !strings.Contains(res.body, `href="/jobs?queue=payments&amp;key=cust-1"`) {
			t.Error("keys page does not link a key to its jobs")
		}
		if regexp.MustCompile(`(?s)cust-1.*cust-2.*Keys per queue`).FindString(res.body) == "" {
			t.Error("keys are not in order of waiting jobs")
		}

		res = e.get("/keys?queue=hold")
		if strings.Contains(res.body, ">cust-1</a>") || !strings.Contains(res.body, "cust-2") || !strings.Contains(res.body, "No blocked sequences.") {
			t.Errorf("keys page filtered to queue hold:\n%s", res.body)
		}
		if res := e.get("/keys?queue=" + strings.Repeat("q", 600)); res.code != http.StatusBadRequest {
			t.Errorf("GET /keys with a 600-byte queue = %d, want 400", res.code)
		}

		res = e.get("/jobs/" + itoa(behind))
		mustContain(t, "job page of a sequenced job", res.body, `<dt>Sequence</dt><dd class="mono"><a href="/jobs?sequence=pay-7">pay-7</a>`)
		res = e.get("/jobs/" + itoa(running))
		mustContain(t, "job page of a keyed job", res.body, `<dt>Key</dt><dd class="mono"><a href="/jobs?queue=hold&amp;key=%3cb%3ecust-2%3c%2fb%3e">&lt;b&gt;cust-2&lt;/b&gt;</a>`)

		res = e.get("/jobs?sequence=pay-7")
		mustContain(t, "jobs filtered by sequence", res.body, `title="sequence pay-7">seq pay-7</span>`, `name="sequence" value="pay-7"`)
		if n := strings.Count(res.body, `title="sequence pay-7"`); n != 2 {
			t.Errorf("jobs?sequence=pay-7 lists %d jobs, want 2", n)
		}
		res = e.get("/jobs?key=cust-1")
		if n := strings.Count(res.body, `title="key cust-1"`); n != 3 {
			t.Errorf("jobs?key=cust-1 lists %d jobs, want 3", n)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
