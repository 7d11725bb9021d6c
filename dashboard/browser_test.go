package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/leasehold/leasehold/dashboard"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestBrowser drives the dashboard in a real headless Chromium against
// SQLite with real data: the browser signs in through the login page with
// the bearer token, every page lays out at 1440 px and at 390 px without the
// page overflowing sideways (and at 1440 px without the main tables
// scrolling), the live refresh swaps content without a reload, and
// resolving a stuck job through the browser changes the database.
//
// Set LEASEHOLD_DASHBOARD_SCREENSHOTS to a directory to keep screenshots of
// every page at both widths (dashboard-<page>-<width>.png):
//
//	mkdir -p /tmp/shots && LEASEHOLD_DASHBOARD_SCREENSHOTS=/tmp/shots go test -count=1 -run 'TestBrowser$' ./dashboard/
func TestBrowser(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs Chromium on PATH; install Debian's package with `apt-get install -y chromium`: %v", err)
	}

	e := newEnv(t, newSQLite(t))
	// A queue with a long name and a backlog in the thousands, to stretch
	// the tables; inserted first, so the newest jobs are the varied ones.
	var backlog []*driver.JobInsertParams
	for i := range 12345 {
		backlog = append(backlog, &driver.JobInsertParams{Kind: "settle", Queue: "settlement-eu-west-1", Priority: 1,
			EncodedArgs: fmt.Appendf(nil, `{"n":%d}`, i), Metadata: []byte(`{}`), MaxAttempts: 5})
	}
	if _, err := e.exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: backlog}); err != nil {
		t.Fatal(err)
	}
	s := e.seed()
	later := time.Now().Add(time.Hour)
	for i := range 12 { // some history for the throughput chart
		id := e.insert("email", "bulk", fmt.Sprintf(`{"n":%d}`, i), "", nil)
		e.claimOne("bulk", time.Minute, nil, id)
		if i%4 == 3 {
			e.finish(id, leasetype.JobStateRetryable, leasetype.OutcomeFailed, "smtp 451 try again later", &later)
			continue
		}
		e.finish(id, leasetype.JobStateCompleted, leasetype.OutcomeCompleted, "", nil)
	}

	// A job with a history: a lease that expired, a failure, then a success
	// after two heartbeats.
	ledger := e.insert("ledger.post", "ledger", `{"entry":"je_1001","amount_cents":129900}`, "ledger-je_1001", nil)
	e.claimOne("ledger", 50*time.Millisecond, nil, ledger)
	for e.job(ledger).State == leasetype.JobStateRunning {
		time.Sleep(20 * time.Millisecond)
		if _, err := e.exec.JobExpire(t.Context(), &driver.JobExpireParams{Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
	e.claimOne("ledger", time.Minute, nil, ledger)
	time.Sleep(30 * time.Millisecond)
	e.finish(ledger, leasetype.JobStateRetryable, leasetype.OutcomeFailed, "ledger: connection reset by peer", nil)
	j := e.claimOne("ledger", time.Minute, nil, ledger)
	for range 2 {
		time.Sleep(40 * time.Millisecond)
		if _, err := e.exec.JobHeartbeat(t.Context(), &driver.JobHeartbeatParams{Owner: testOwner, Leases: []driver.LeaseRenewal{{ID: ledger, Token: j.LeaseToken, TTL: time.Minute}}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(40 * time.Millisecond)
	e.finish(ledger, leasetype.JobStateCompleted, leasetype.OutcomeCompleted, "", nil)

	nightly, err := e.exec.PeriodicEnsure(t.Context(), &driver.PeriodicEnsureParams{
		Name: "reports.nightly", Spec: "0 3 * * *", NextRunAt: time.Now().Add(5 * time.Hour).UTC(),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its last job went to the bulk queue, which is paused.
	leader, err := e.exec.LeaderAttempt(t.Context(), &driver.LeaderParams{Name: "periodic", Owner: "test-leader", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := e.exec.PeriodicAdvance(t.Context(), &driver.PeriodicAdvanceParams{
		Name: nightly.Name, From: nightly.NextRunAt, Next: nightly.NextRunAt.Add(24 * time.Hour), SlotAt: time.Now().UTC(),
		LastJobID: e.insert("email", "bulk", `{"n":"nightly"}`, "", nil), LeaderName: "periodic", LeaderToken: leader.Token,
	}); err != nil || !ok {
		t.Fatalf("PeriodicAdvance: %v, %v", ok, err)
	}
	if err := e.client.QueuePause(t.Context(), "bulk"); err != nil {
		t.Fatal(err)
	}
	// A dead job and a job a year ahead.
	dead := e.insert(chargeKind, "payments", `{"amount":900}`, "", nil)
	e.claimOne("payments", time.Minute, nil, dead)
	e.finish(dead, leasetype.JobStateDiscarded, leasetype.OutcomeFailed, "psp: card declined (do_not_honor); not retried", nil)
	nextYear := time.Now().Add(400 * 24 * time.Hour)
	// The fleet: a worker with many queues and a long host name, and one
	// that stopped beating.
	for _, c := range []*driver.ClientRegisterParams{
		{Owner: "ip-10-20-30-40.eu-west-1.compute.internal:48213:worker-payments-7f3a", Host: "ip-10-20-30-40.eu-west-1.compute.internal", PID: 48213,
			ID: "worker-payments-7f3a", Version: "v1.4.2", Queues: []string{"bulk", "default", "ledger", "payments", "reports", "settlement-eu-west-1"}, Running: 12, TTL: time.Hour},
		{Owner: "web-2:991:c0ffee", Host: "web-2", PID: 991, ID: "c0ffee", Version: "(devel)", Queues: []string{"default"}, Running: 1, TTL: time.Millisecond},
	} {
		if err := e.exec.ClientRegister(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	e.insert("report", "reports", `{"year":2027}`, "", &nextYear)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const token = "browser-test-token-0123456789"
	srv := &http.Server{Handler: e.handler(&dashboard.Options{RefreshInterval: time.Second, BearerToken: token}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	base := "http://" + ln.Addr().String()

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	// Start the browser with a context without a deadline: a deadline on the
	// first call would bound the browser's life, not the call.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium (%s): %v", chromium, err)
	}
	// Generous: on a loaded two-core machine, with the other tests running
	// in parallel, the steps below take well over 30 s.
	ctx, cancel := context.WithTimeout(browser, 2*time.Minute)
	defer cancel()

	// Accept the confirmation dialogs of the actions.
	dialogs := chromedp.Events(browser, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(browser, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	// Collect console errors: a CSP violation or a script error shows up here.
	var mu sync.Mutex
	var consoleErrors []string
	console := chromedp.Console(browser)
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				consoleErrors = append(consoleErrors, m.String())
				mu.Unlock()
			}
		}
	}()

	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return n
	}
	shots := os.Getenv("LEASEHOLD_DASHBOARD_SCREENSHOTS")
	width := int64(1440)
	screenshot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		name = fmt.Sprintf("%s-%d", name, width)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, "dashboard-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Sign in: a page asked for without a session leads to the login page,
	// a wrong token is refused, the right one comes back to the page.
	run("open the stuck page signed out", chromedp.Navigate(base+"/stuck"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))
	if got := eval(`location.pathname === "/login" && location.search === "?next=%2Fstuck" ? 1 : 0`); got != 1 {
		t.Errorf("signed out, /stuck did not lead to /login?next=%%2Fstuck")
	}
	screenshot("login")
	run("sign in with a wrong token",
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), "not-the-token-at-all"),
		chromedp.Click(chromedp.CSS(`form.login button`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash.bad")),
	)
	if got := text("p.flash.bad"); got != "Wrong token." {
		t.Errorf("wrong token says %q", got)
	}
	// The refused sign-in answers 401, which the console reports; that one
	// is expected.
	mu.Lock()
	consoleErrors = slices.DeleteFunc(consoleErrors, func(m string) bool { return strings.Contains(m, "status of 401") })
	mu.Unlock()
	run("sign in",
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), token),
		chromedp.Click(chromedp.CSS(`form.login button`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#job-%d", s.stuck))),
	)
	if got := eval(`location.pathname === "/stuck" ? 1 : 0`); got != 1 {
		t.Error("after signing in the browser is not back on /stuck")
	}

	// Every page at a desktop and a phone width: nothing overflows the page
	// sideways, the header's links stay on screen, and at 1440 px the main
	// tables fit without scrolling, the overview's lag column in view.
	graph := e.insertWideGraph(8)
	pages := []struct{ name, path, wait string }{
		{"overview", "/", "table.queues"},
		{"jobs", "/jobs", "table.grid tbody tr"},
		{"job", fmt.Sprintf("/jobs/%d", ledger), "table.attempts"},
		{"job-retryable", fmt.Sprintf("/jobs/%d", s.retryable), "table.attempts"},
		{"job-stuck", fmt.Sprintf("/jobs/%d", s.stuck), "form.resolve"},
		{"running", "/running", "td.left"},
		{"stuck", "/stuck", "form.resolve"},
		{"discarded", "/discarded", "table.grid tbody tr"},
		{"schedules", "/schedules", "table.schedules"},
		{"audit", "/audit", "table.audit"},
		{"clients", "/clients", "table.clients td.mono"},
		{"keys", "/keys", "table.keys"},
		{"jobs-bulk", "/jobs?state=discarded&queue=payments", "form.bulk"},
		{"job-graph", fmt.Sprintf("/jobs/%d", graph["payout-merchant-2"]), "svg.depgraph"},
		{"graph", fmt.Sprintf("/graphs/%d", graph["split-settlements"]), "svg.depgraph"},
	}
	for _, w := range []int64{1440, 390} {
		width = w
		run(fmt.Sprintf("set the viewport to %d px", w), chromedp.EmulateViewport(w, 900))
		for _, pg := range pages {
			run(fmt.Sprintf("open %s at %d px", pg.name, w), chromedp.Navigate(base+pg.path), chromedp.WaitVisible(chromedp.CSS(pg.wait)))
			if over := eval(`document.documentElement.scrollWidth - window.innerWidth`); over > 0 {
				t.Errorf("%s at %d px: the page is %d px wider than the window", pg.name, w, over)
			}
			if off := eval(`Math.max(0, ...Array.from(document.querySelectorAll("header.top a, header.top button")).map(a => Math.ceil(a.getBoundingClientRect().right - window.innerWidth)))`); off > 0 {
				t.Errorf("%s at %d px: a header link ends %d px past the window", pg.name, w, off)
			}
			if w == 1440 {
				if n := eval(`Array.from(document.querySelectorAll("main table.grid")).filter(t => t.parentElement.scrollWidth > t.parentElement.clientWidth + 1).length`); n > 0 {
					t.Errorf("%s at %d px: %d tables scroll sideways", pg.name, w, n)
				}
			}
			screenshot(pg.name)
		}
		run("back to the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("th.lag")))
		if w == 1440 {
			if off := eval(`Math.ceil(document.querySelector("table.queues th.lag").getBoundingClientRect().right - window.innerWidth)`); off > 0 {
				t.Errorf("at 1440 px the overview's lag column ends %d px past the window", off)
			}
		} else {
			// On a phone the columns an operator acts on stay in view: the
			// queue's lag, a running job's time left and its Cancel.
			if off := eval(`Math.ceil(document.querySelector("table.queues th.lag").getBoundingClientRect().right - window.innerWidth)`); off > 0 {
				t.Errorf("at %d px the overview's lag column ends %d px past the window", w, off)
			}
			run("open running at 390 px", chromedp.Navigate(base+"/running"), chromedp.WaitVisible(chromedp.CSS("td.left")))
			if off := eval(`Math.ceil(document.querySelector("td.cancel").getBoundingClientRect().right - window.innerWidth)`); off > 0 {
				t.Errorf("at %d px the running page's Cancel column ends %d px past the window", w, off)
			}
			run("open a job at 390 px", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, ledger)), chromedp.WaitVisible(chromedp.CSS("table.attempts")))
			if off := eval(`Math.ceil(document.querySelector("table.attempts td.err").getBoundingClientRect().right - window.innerWidth)`); off > 0 {
				t.Errorf("at %d px the attempts' error column ends %d px past the window", w, off)
			}
			run("back to the overview at 390 px", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("th.lag")))
			// On a phone the nav wraps below the brand instead of running off.
			if rows := eval(`new Set(Array.from(document.querySelectorAll("header.top nav a")).map(a => Math.round(a.getBoundingClientRect().top))).size`); rows < 2 {
				t.Errorf("at %d px the nav links sit on %d row(s), want them wrapped", w, rows)
			}
		}
	}
	width = 1440
	run("back to a desktop viewport", chromedp.EmulateViewport(1440, 1000))

	// Overview.
	run("open the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table.queues")))
	main := text("main")
	for _, want := range []string{"Overview", "payments", "bulk", "reports", "Throughput", "Clients alive", "All queues", "12,345", "held"} {
		if !strings.Contains(main, want) {
			t.Errorf("overview does not show %q:\n%s", want, main)
		}
	}
	if n := eval(`document.querySelectorAll("svg.chart:not(.spark) rect").length`); n == 0 {
		t.Error("the throughput chart has no bars")
	}
	if got := text("#live-toggle"); got != "Live" {
		t.Errorf("live toggle says %q", got)
	}
	// Live refresh: new work shows up without a reload.
	eval(`window.__noReload = 1`)
	e.insert("email", "arrived-live", `{}`, "", nil)
	run("see the new queue appear", chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs?queue=arrived-live"]`)))
	if eval(`window.__noReload || 0`) != 1 {
		t.Error("the page reloaded instead of swapping its content")
	}

	// The job list.
	run("open jobs", chromedp.Navigate(base+"/jobs"), chromedp.WaitVisible(chromedp.CSS("table.grid tbody tr")))
	if n := eval(`document.querySelectorAll("table.grid tbody tr").length`); n < 15 {
		t.Errorf("job list shows %d rows", n)
	}

	// A job with its attempt timeline.
	run("open a job", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, s.retryable)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
	if got := text("h1"); !strings.Contains(got, fmt.Sprint(s.retryable)) || !strings.Contains(got, "retryable") {
		t.Errorf("job heading %q", got)
	}
	if got := text("pre.err"); !strings.Contains(got, `<script>alert("error")</script>`) {
		t.Errorf("the error text is not shown as text: %q", got)
	}
	run("open a job with history", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, ledger)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
	if n := eval(`document.querySelectorAll("svg.timeline rect.held").length`); n != 3 {
		t.Errorf("the timeline of job %d shows %d leases, want 3", ledger, n)
	}
	if n := eval(`document.querySelectorAll("table.attempts tbody tr").length`); n != 3 {
		t.Errorf("the attempts table of job %d has %d rows, want 3", ledger, n)
	}

	// Running jobs.
	run("open running", chromedp.Navigate(base+"/running"), chromedp.WaitVisible(chromedp.CSS("td.left")))
	if got := text("td.left"); !strings.HasSuffix(got, "s") {
		t.Errorf("lease time left %q", got)
	}
	// Cancel the running job: the request is recorded, the row says so.
	cancelBtn := fmt.Sprintf(`form[action="/jobs/%d/cancel"] button`, s.running)
	run("click cancel",
		chromedp.Click(chromedp.CSS(cancelBtn)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
		chromedp.WaitVisible(chromedp.CSS("span.cancel-req")),
	)
	if got := text("p.flash"); !strings.HasPrefix(got, fmt.Sprintf("Cancellation of job %d was requested", s.running)) {
		t.Errorf("flash %q", got)
	}
	if j := e.job(s.running); j.CancelRequestedAt == nil {
		t.Error("after the click the running job has no cancellation request")
	}
	if n := eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, cancelBtn)); n != 0 {
		t.Error("the Cancel button is still offered after the request")
	}
	screenshot("running-cancel-requested")

	// The periodic schedules.
	run("open schedules", chromedp.Navigate(base+"/schedules"), chromedp.WaitVisible(chromedp.CSS("table.schedules")))
	if got := text("table.schedules tbody"); !strings.Contains(got, "reports.nightly") || !strings.Contains(got, "0 3 * * *") ||
		!strings.Contains(got, "in ") || !strings.Contains(got, "bulk paused") {
		t.Errorf("schedules table: %q", got)
	}

	// Stuck jobs: resolve one for a retry through the browser, with a note.
	card := fmt.Sprintf("#job-%d", s.stuck)
	run("open stuck", chromedp.Navigate(base+"/stuck"), chromedp.WaitVisible(chromedp.CSS(card)))
	if got := text(card); !strings.Contains(got, chargeKind) || !strings.Contains(got, testOwner) || !strings.Contains(got, stuckKey) {
		t.Errorf("stuck card: %q", got)
	}
	run("resolve for a retry",
		chromedp.SendKeys(chromedp.CSS(card+` input[name="note"]`), "PSP has no charge for pay-42"),
		chromedp.Click(chromedp.CSS(card+` form[action$="/resolve"] button[value="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	)
	if got := text("p.flash"); got != fmt.Sprintf("Job %d was resolved for a retry (available).", s.stuck) {
		t.Errorf("flash %q", got)
	}
	if j := e.job(s.stuck); (j.State != leasetype.JobStateAvailable && j.State != leasetype.JobStateCompleted) || !strings.Contains(j.LastError, "PSP has no charge") {
		t.Errorf("after the click the job is %s with last error %q, want available with the note", j.State, j.LastError)
	}
	if n := eval(fmt.Sprintf(`document.querySelectorAll(%q).length`, card)); n != 0 {
		t.Error("the retried job is still listed as stuck")
	}

	// Pause a queue from the overview.
	pause := `form[action="/queues/reports/pause"] button`
	run("open the overview again", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(pause)))
	run("click pause",
		chromedp.Click(chromedp.CSS(pause)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	)
	if got := text("p.flash"); !strings.HasPrefix(got, "Queue reports is paused") {
		t.Errorf("flash %q", got)
	}
	if infos, err := e.client.QueueList(t.Context()); err != nil || len(infos) != 2 || infos[1].Name != "reports" || !infos[1].Paused {
		t.Errorf("after the click QueueList = %v, %v; want bulk and reports paused", infos, err)
	}
	run("see the resume button", chromedp.WaitVisible(chromedp.CSS(`form[action="/queues/reports/resume"] button`)))
	screenshot("overview-paused")

	// Bulk retry of the dead payments from the filtered jobs list: the count,
	// a confirmation page, the POST; the audit page says who did it.
	run("open the dead payments", chromedp.Navigate(base+"/jobs?state=discarded&queue=payments"), chromedp.WaitVisible(chromedp.CSS("form.bulk")))
	if got := text(`form.bulk button[value="retry"]`); got != "Retry all 1 matching" {
		t.Errorf("bulk retry button says %q", got)
	}
	run("ask for the bulk retry",
		chromedp.Click(chromedp.CSS(`form.bulk button[value="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/bulk"][method="post"] button`)),
	)
	screenshot("bulk-confirm")
	run("confirm the bulk retry",
		chromedp.Click(chromedp.CSS(`form[action="/bulk"][method="post"] button`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	)
	if got := text("p.flash"); got != "1 jobs retried." {
		t.Errorf("bulk flash %q", got)
	}
	if j := e.job(dead); j.State != leasetype.JobStateAvailable {
		t.Errorf("after the bulk retry the dead job is %s, want available", j.State)
	}
	if got := text("table.audit tbody tr"); !strings.Contains(got, "session") || !strings.Contains(got, "bulk_retry") {
		t.Errorf("the newest audit entry is %q, want the browser session's bulk_retry", got)
	}
	screenshot("audit-after-bulk")

	// Sign out: the session is gone, pages lead to the login page again.
	run("sign out",
		chromedp.Click(chromedp.CSS(`form.signout button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
	)
	run("open the overview signed out", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)))

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("the browser console reported errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the browser test ran out of time")
	}
}
