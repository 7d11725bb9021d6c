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
// SQLite with real data: the pages render, the live refresh swaps content
// without a reload, and retrying a stuck job through the browser changes the
// database. Set LEASEHOLD_DASHBOARD_SCREENSHOTS to a directory to keep
// screenshots of the pages.
func TestBrowser(t *testing.T) {
	t.Parallel()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the browser test needs Chromium on PATH; install Debian's package with `apt-get install -y chromium`: %v", err)
	}

	e := newEnv(t, newSQLite(t))
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

	if _, err := e.exec.PeriodicEnsure(t.Context(), &driver.PeriodicEnsureParams{
		Name: "reports.nightly", Spec: "0 3 * * *", NextRunAt: time.Now().Add(5 * time.Hour).UTC(),
	}); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.handler(&dashboard.Options{RefreshInterval: time.Second}), ReadHeaderTimeout: 5 * time.Second}
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
	screenshot := func(name string) {
		t.Helper()
		if shots == "" {
			return
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, "dashboard-"+name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Overview.
	run("open the overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table.queues")))
	main := text("main")
	for _, want := range []string{"Overview", "payments", "bulk", "reports", "Throughput", "Client counters"} {
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
	screenshot("overview")

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
	screenshot("jobs")

	// A job with its attempt timeline.
	run("open a job", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, s.retryable)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
	if got := text("h1"); !strings.Contains(got, fmt.Sprint(s.retryable)) || !strings.Contains(got, "retryable") {
		t.Errorf("job heading %q", got)
	}
	if got := text("pre.err"); !strings.Contains(got, `<script>alert("error")</script>`) {
		t.Errorf("the error text is not shown as text: %q", got)
	}
	screenshot("job-retryable")
	run("open a job with history", chromedp.Navigate(fmt.Sprintf("%s/jobs/%d", base, ledger)), chromedp.WaitVisible(chromedp.CSS("svg.timeline")))
	if n := eval(`document.querySelectorAll("svg.timeline rect.held").length`); n != 3 {
		t.Errorf("the timeline of job %d shows %d leases, want 3", ledger, n)
	}
	if n := eval(`document.querySelectorAll("table.attempts tbody tr").length`); n != 3 {
		t.Errorf("the attempts table of job %d has %d rows, want 3", ledger, n)
	}
	screenshot("job")

	// Running jobs.
	run("open running", chromedp.Navigate(base+"/running"), chromedp.WaitVisible(chromedp.CSS("td.left")))
	if got := text("td.left"); !strings.HasSuffix(got, "s") {
		t.Errorf("lease time left %q", got)
	}
	screenshot("running")
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
	if got := text("table.schedules tbody"); !strings.Contains(got, "reports.nightly") || !strings.Contains(got, "0 3 * * *") || !strings.Contains(got, "in ") {
		t.Errorf("schedules table: %q", got)
	}
	screenshot("schedules")

	// Stuck jobs: retry one through the browser.
	card := fmt.Sprintf("#job-%d", s.stuck)
	run("open stuck", chromedp.Navigate(base+"/stuck"), chromedp.WaitVisible(chromedp.CSS(card)))
	if got := text(card); !strings.Contains(got, chargeKind) || !strings.Contains(got, testOwner) || !strings.Contains(got, stuckKey) {
		t.Errorf("stuck card: %q", got)
	}
	screenshot("stuck")
	run("click retry",
		chromedp.Click(chromedp.CSS(card+` form[action$="/retry"] button`)),
		chromedp.WaitVisible(chromedp.CSS("p.flash")),
	)
	if got := text("p.flash"); got != fmt.Sprintf("Job %d is available again.", s.stuck) {
		t.Errorf("flash %q", got)
	}
	if j := e.job(s.stuck); j.State != leasetype.JobStateAvailable && j.State != leasetype.JobStateCompleted {
		t.Errorf("after the click the job is %s, want available", j.State)
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
	if infos, err := e.client.QueueList(t.Context()); err != nil || len(infos) != 1 || infos[0].Name != "reports" || !infos[0].Paused {
		t.Errorf("after the click QueueList = %v, %v; want reports paused", infos, err)
	}
	run("see the resume button", chromedp.WaitVisible(chromedp.CSS(`form[action="/queues/reports/resume"] button`)))
	screenshot("overview-paused")

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("the browser console reported errors:\n%s", strings.Join(consoleErrors, "\n"))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Error("the browser test ran out of time")
	}
}
