package drivertest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// clientEnv is one client-level test's database and the clients on it.
type clientEnv[TTx any] struct {
	t    *testing.T
	b    Backend[TTx]
	d    driver.Driver[TTx]
	exec driver.Executor
}

func newClientEnv[TTx any](t *testing.T, b Backend[TTx]) *clientEnv[TTx] {
	t.Helper()
	d := b.New(t)
	return &clientEnv[TTx]{t: t, b: b, d: d, exec: d.GetExecutor()}
}

// testConfig returns a config with short intervals for tests; fields set in
// cfg win.
func testConfig(cfg leasehold.Config) *leasehold.Config {
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	if cfg.WatcherInterval == 0 {
		cfg.WatcherInterval = 100 * time.Millisecond
	}
	if cfg.Retry == nil {
		cfg.Retry = leasehold.ExponentialBackoff{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: -1}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &cfg
}

// client returns a started client on d (the env's driver when nil), stopped
// at cleanup.
func (e *clientEnv[TTx]) client(d driver.Driver[TTx], cfg leasehold.Config) *leasehold.Client[TTx] {
	e.t.Helper()
	if d == nil {
		d = e.d
	}
	c, err := leasehold.NewClient(d, testConfig(cfg))
	if err != nil {
		e.t.Fatalf("NewClient: %v", err)
	}
	if cfg.Workers != nil {
		if err := c.Start(context.Background()); err != nil {
			e.t.Fatalf("Start: %v", err)
		}
		e.t.Cleanup(func() {
			// A handler that ignores its context can hold Stop until a later
			// cleanup releases it: do not wait for it forever here.
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = c.StopAndCancel(ctx)
			}()
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				e.t.Errorf("client %s did not stop within 10 s", c.Owner())
			}
		})
	}
	return c
}

// job reads a job or fails the test.
func (e *clientEnv[TTx]) job(id int64) *leasetype.JobRow {
	e.t.Helper()
	row, err := e.exec.JobGet(context.Background(), &driver.JobGetParams{ID: id})
	if err != nil {
		e.t.Fatalf("JobGet(%d): %v", id, err)
	}
	return row
}

// attempts reads a job's attempt history or fails the test.
func (e *clientEnv[TTx]) attempts(id int64) []*leasetype.AttemptRow {
	e.t.Helper()
	rows, err := e.exec.JobAttempts(context.Background(), &driver.JobAttemptsParams{JobID: id})
	if err != nil {
		e.t.Fatalf("JobAttempts(%d): %v", id, err)
	}
	return rows
}

// outcomes lists the outcomes of a job's attempts.
func (e *clientEnv[TTx]) outcomes(id int64) []leasetype.AttemptOutcome {
	var out []leasetype.AttemptOutcome
	for _, a := range e.attempts(id) {
		out = append(out, a.Outcome)
	}
	return out
}

// waitState waits until the job is in state, failing after timeout.
func (e *clientEnv[TTx]) waitState(id int64, state leasetype.JobState, timeout time.Duration) *leasetype.JobRow {
	e.t.Helper()
	var row *leasetype.JobRow
	waitFor(e.t, timeout, func() bool {
		row = e.job(id)
		return row.State == state
	}, func() string { return "job state " + string(row.State) + ", want " + string(state) })
	return row
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %s: %s", timeout, describe())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// insert inserts args with opts through c, failing the test on error.
func insert[TTx any](t *testing.T, c *leasehold.Client[TTx], args leasehold.JobArgs, opts *leasehold.InsertOpts) *leasetype.JobRow {
	t.Helper()
	res, err := c.Insert(context.Background(), args, opts)
	if err != nil {
		t.Fatalf("Insert: %v", err)
	}
	return res.Job
}

// runLog records handler runs per job.
type runLog struct {
	mu   sync.Mutex
	runs map[int64][]run
}

type run struct {
	owner string
	token int64
	at    time.Time
}

func newRunLog() *runLog { return &runLog{runs: map[int64][]run{}} }

func (l *runLog) add(row *leasetype.JobRow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[row.ID] = append(l.runs[row.ID], run{owner: row.LeaseOwner, token: row.LeaseToken, at: time.Now()})
}

func (l *runLog) get(id int64) []run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]run(nil), l.runs[id]...)
}

func (l *runLog) count(id int64) int { return len(l.get(id)) }

// testArgs is the job of most client tests; the worker decides what to do
// from its fields.
type testArgs struct {
	Name string `json:"name"`
	// FailTimes makes the first FailTimes attempts fail.
	FailTimes int `json:"fail_times,omitempty"`
}

func (testArgs) Kind() string { return "drivertest_job" }

// heavy admits one load test (thousands of jobs through several clients) at
// a time. The suite's tests run in parallel; two load tests at once on a
// 2-core machine, under the race detector, starve each other and every
// timing-sensitive test beside them.
var heavy = make(chan struct{}, 1)

// runHeavy waits for the load-test slot and holds it until the test ends.
func runHeavy(t *testing.T) {
	t.Helper()
	heavy <- struct{}{}
	t.Cleanup(func() { <-heavy })
}
