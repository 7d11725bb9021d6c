package leaseholdtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// DefaultWorkTimeout bounds Work and WorkJob when their context has no
// deadline.
const DefaultWorkTimeout = time.Minute

// Worker runs one worker's jobs synchronously, one job per call, through a
// real leasehold client: the job is claimed under a lease, heartbeated, and
// its outcome (completion, retry, discard, snooze, cancel) is written by the
// client exactly as in production. Use it to test a worker together with the
// queue's semantics.
//
// Each call starts a client with only this worker on one queue, runs one
// attempt, waits until that lease has ended in the database, and stops the
// client. A job it retries or snoozes is not run again; call WorkJob for the
// next attempt once it is due.
type Worker[T leasehold.JobArgs, TTx any] struct {
	d      driver.Driver[TTx]
	config leasehold.Config
	worker leasehold.Worker[T]
	opts   leasehold.WorkerOpts
}

// NewWorker returns a Worker that runs w on d. config supplies the client
// settings (lease TTL, retry policy, logger; nil for the defaults) and opts
// the worker's options (nil for the defaults). Workers and Queues in config
// are ignored; PollInterval and WatcherInterval default to short values. It
// fails the test with Fatalf, and returns nil, when the configuration is
// invalid.
func NewWorker[T leasehold.JobArgs, TTx any](t TB, d driver.Driver[TTx], config *leasehold.Config, w leasehold.Worker[T], opts *leasehold.WorkerOpts) *Worker[T, TTx] {
	t.Helper()
	if d == nil || w == nil {
		t.Fatalf("leaseholdtest: NewWorker needs a driver and a worker")
		return nil
	}
	tw := &Worker[T, TTx]{d: d, worker: w}
	if config != nil {
		tw.config = *config
	}
	if opts != nil {
		tw.opts = *opts
	}
	if tw.config.PollInterval == 0 {
		tw.config.PollInterval = 20 * time.Millisecond
	}
	if tw.config.WatcherInterval == 0 {
		tw.config.WatcherInterval = 50 * time.Millisecond
	}
	// Validate now, not at the first Work.
	if _, _, err := tw.newClient(privateQueue()); err != nil {
		t.Fatalf("leaseholdtest: NewWorker: %v", err)
		return nil
	}
	return tw
}

// WorkResult is what one attempt did.
type WorkResult struct {
	// Job is the job's row after the attempt.
	Job *leasetype.JobRow
	// Attempts is the job's attempt history, oldest first; the last row is
	// this attempt's.
	Attempts []*leasetype.AttemptRow
	// Err is the error the handler returned: nil when it returned nil,
	// panicked or never ran.
	Err error
	// Panic is the value the handler panicked with, nil when it did not.
	Panic any
}

// Outcome returns how this attempt ended (the last attempt row's outcome).
func (r *WorkResult) Outcome() leasetype.AttemptOutcome {
	if r == nil || len(r.Attempts) == 0 {
		return ""
	}
	return r.Attempts[len(r.Attempts)-1].Outcome
}

// Work inserts a job with args and opts (nil for the defaults) into a queue
// of its own, runs it once, and returns the result. opts.Queue is replaced by
// that private queue, so that no other job is claimed. It fails the test with
// Fatalf, and returns nil, when the job cannot be inserted, is not claimed,
// or its lease does not end before ctx's deadline (DefaultWorkTimeout when
// ctx has none).
func (w *Worker[T, TTx]) Work(ctx context.Context, t TB, args T, opts *leasehold.InsertOpts) *WorkResult {
	t.Helper()
	queue := privateQueue()
	client, gate, err := w.newClient(queue)
	if err != nil {
		t.Fatalf("leaseholdtest: Work: %v", err)
		return nil
	}
	o := leasehold.InsertOpts{}
	if opts != nil {
		o = *opts
	}
	o.Queue = queue
	res, err := client.Insert(ctx, args, &o)
	if err != nil {
		t.Fatalf("leaseholdtest: Work: insert job of kind %q: %v", args.Kind(), err)
		return nil
	}
	if res.UniqueSkipped {
		t.Fatalf("leaseholdtest: Work: unique key %q is held by job %d (queue %q, state %s); work that job with WorkJob",
			o.UniqueKey, res.Job.ID, res.Job.Queue, res.Job.State)
		return nil
	}
	if res.Job.State != leasetype.JobStateAvailable {
		t.Fatalf("leaseholdtest: Work: job %d was inserted as %s (scheduled at %s); Work runs jobs that are due now",
			res.Job.ID, res.Job.State, res.Job.ScheduledAt.UTC().Format(time.RFC3339Nano))
		return nil
	}
	return w.run(ctx, t, client, gate, res.Job)
}

// WorkJob runs an already inserted job of T's kind once and returns the
// result. The job must be claimable now (available, or scheduled or
// retryable with its time come) and be the only claimable job in its queue,
// since claims take a queue's first job, not a chosen one. Another client
// working that queue at the same time may take it first. It fails the test
// with Fatalf, and returns nil, when any of this does not hold or the lease
// does not end before ctx's deadline (DefaultWorkTimeout when ctx has none).
func (w *Worker[T, TTx]) WorkJob(ctx context.Context, t TB, job *leasetype.JobRow) *WorkResult {
	t.Helper()
	if job == nil {
		t.Fatalf("leaseholdtest: WorkJob: job is nil")
		return nil
	}
	exec := w.d.GetExecutor()
	row, err := exec.JobGet(ctx, &driver.JobGetParams{ID: job.ID})
	if err != nil {
		t.Fatalf("leaseholdtest: WorkJob: read job %d: %v", job.ID, err)
		return nil
	}
	var zero T
	if row.Kind != zero.Kind() {
		t.Fatalf("leaseholdtest: WorkJob: job %d is of kind %q, this worker runs %q", row.ID, row.Kind, zero.Kind())
		return nil
	}
	now, err := exec.Now(ctx)
	if err != nil {
		t.Fatalf("leaseholdtest: WorkJob: read database clock: %v", err)
		return nil
	}
	if !claimable(row, now) {
		t.Fatalf("leaseholdtest: WorkJob: job %d is not claimable now: state %s, scheduled at %s (database clock %s)",
			row.ID, row.State, row.ScheduledAt.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
		return nil
	}
	others, err := exec.JobList(ctx, &driver.JobListParams{
		Queue:  row.Queue,
		States: []leasetype.JobState{leasetype.JobStateAvailable, leasetype.JobStateScheduled, leasetype.JobStateRetryable},
		Limit:  listPage,
	})
	if err != nil {
		t.Fatalf("leaseholdtest: WorkJob: list jobs of queue %q: %v", row.Queue, err)
		return nil
	}
	others = slices.DeleteFunc(others, func(r *leasetype.JobRow) bool { return r.ID == row.ID || !claimable(r, now) })
	if len(others) > 0 {
		t.Fatalf("leaseholdtest: WorkJob: job %d is not the only claimable job in queue %q, so another could be claimed instead; insert it into a queue of its own. Found%s",
			row.ID, row.Queue, describeRows(others))
		return nil
	}
	client, gate, err := w.newClient(row.Queue)
	if err != nil {
		t.Fatalf("leaseholdtest: WorkJob: %v", err)
		return nil
	}
	return w.run(ctx, t, client, gate, row)
}

// claimable reports whether a claim at now may take row.
func claimable(row *leasetype.JobRow, now time.Time) bool {
	switch row.State {
	case leasetype.JobStateAvailable:
		return true
	case leasetype.JobStateScheduled, leasetype.JobStateRetryable:
		return !row.ScheduledAt.After(now)
	}
	return false
}

// run starts client, waits for its one claim and for that lease to end, stops
// it and reads the result.
func (w *Worker[T, TTx]) run(ctx context.Context, t TB, client *leasehold.Client[TTx], gate *gateExecutor, job *leasetype.JobRow) *WorkResult {
	t.Helper()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWorkTimeout)
		defer cancel()
	}
	rec := gate.recorder
	if err := client.Start(ctx); err != nil {
		t.Fatalf("leaseholdtest: start client: %v", err)
		return nil
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		// By the time this runs the handler has returned or is stuck:
		// cancel it rather than wait.
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return client.StopAndCancel(stopCtx)
	}
	// Runs on every return, including a real Fatalf's runtime.Goexit.
	defer func() { _ = stop() }()

	var claimed *leasetype.JobRow
	select {
	case <-gate.claimedCh:
		claimed = gate.claimedRow()
	case <-ctx.Done():
		t.Fatalf("leaseholdtest: job %d was not claimed before the deadline (%v); its state: %s", job.ID, ctx.Err(), w.stateOf(job.ID))
		return nil
	}
	if claimed.ID != job.ID {
		t.Fatalf("leaseholdtest: the client claimed job %d (kind %q) instead of job %d; keep the job alone in its queue", claimed.ID, claimed.Kind, job.ID)
		return nil
	}

	// The lease has ended when its attempt row exists: written with the
	// handler's outcome, or by the expirer when the lease expired.
	exec := w.d.GetExecutor()
	var attempts []*leasetype.AttemptRow
	for {
		var err error
		attempts, err = exec.JobAttempts(ctx, &driver.JobAttemptsParams{JobID: job.ID})
		if err == nil && slices.ContainsFunc(attempts, func(a *leasetype.AttemptRow) bool { return a.Token == claimed.LeaseToken }) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("leaseholdtest: the lease of job %d (token %d) did not end before the deadline (%v); handler %s; job: %s",
				job.ID, claimed.LeaseToken, ctx.Err(), rec.status(), w.stateOf(job.ID))
			return nil
		}
		sleep(ctx, 10*time.Millisecond)
	}
	// A handler that completed its job with CompleteTx may still be
	// returning, and one whose lease expired is unwinding after its context
	// was cancelled: let it finish on its own.
	for rec.running() {
		if ctx.Err() != nil {
			t.Fatalf("leaseholdtest: the handler of job %d has not returned before the deadline (%v), although its lease has ended", job.ID, ctx.Err())
			return nil
		}
		sleep(ctx, 5*time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("leaseholdtest: stop client: %v (the handler of job %d ignores its context?)", err, job.ID)
		return nil
	}
	row, err := exec.JobGet(ctx, &driver.JobGetParams{ID: job.ID})
	if err != nil {
		t.Fatalf("leaseholdtest: read job %d: %v", job.ID, err)
		return nil
	}
	attempts, err = exec.JobAttempts(ctx, &driver.JobAttemptsParams{JobID: job.ID})
	if err != nil {
		t.Fatalf("leaseholdtest: read attempts of job %d: %v", job.ID, err)
		return nil
	}
	res := rec.result()
	res.Job, res.Attempts = row, attempts
	return res
}

// stateOf describes a job's state for a failure message.
func (w *Worker[T, TTx]) stateOf(id int64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	row, err := w.d.GetExecutor().JobGet(ctx, &driver.JobGetParams{ID: id})
	if err != nil {
		return fmt.Sprintf("unknown (%v)", err)
	}
	return describeRow(row)
}

// newClient returns a stopped client that works only this worker, on queue,
// with one slot, through a driver that lets it claim one job only.
func (w *Worker[T, TTx]) newClient(queue string) (*leasehold.Client[TTx], *gateExecutor, error) {
	rec := &recorder[T]{worker: w.worker}
	workers := leasehold.NewWorkers()
	opts := w.opts
	if err := leasehold.AddWorkerSafely(workers, leasehold.Worker[T](rec), &opts); err != nil {
		return nil, nil, err
	}
	cfg := w.config
	cfg.Workers = workers
	cfg.Queues = map[string]leasehold.QueueConfig{queue: {MaxWorkers: 1}}
	gate := &gateExecutor{Executor: w.d.GetExecutor(), claimedCh: make(chan struct{}), recorder: rec}
	client, err := leasehold.NewClient[TTx](&gateDriver[TTx]{Driver: w.d, exec: gate}, &cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, gate, nil
}

// privateQueue returns a queue name no other test uses.
func privateQueue() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "leaseholdtest-" + hex.EncodeToString(b)
}

// resultRecorder is the handler's result as seen by its wrapper.
type resultRecorder interface {
	// running reports whether the handler has been called and not returned.
	running() bool
	// status describes the handler's progress for a failure message.
	status() string
	// result returns what the handler returned.
	result() *WorkResult
}

// recorder wraps the user's worker to record what its handler did. It
// returns exactly what the handler returned, and re-panics its panic, so the
// client decides the outcome as it would in production.
type recorder[T leasehold.JobArgs] struct {
	worker leasehold.Worker[T]

	mu                sync.Mutex
	started, returned bool
	err               error
	panic             any
}

func (r *recorder[T]) Work(ctx context.Context, job *leasehold.Job[T]) (err error) {
	r.mu.Lock()
	r.started = true
	r.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			r.set(nil, p)
			panic(p)
		}
	}()
	err = r.worker.Work(ctx, job)
	r.set(err, nil)
	return err
}

func (r *recorder[T]) set(err error, p any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.returned, r.err, r.panic = true, err, p
}

func (r *recorder[T]) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started && !r.returned
}

func (r *recorder[T]) status() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.started:
		return "never called"
	case !r.returned:
		return "still running"
	case r.panic != nil:
		return fmt.Sprintf("panicked with %v", r.panic)
	default:
		return fmt.Sprintf("returned %v", r.err)
	}
}

func (r *recorder[T]) result() *WorkResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &WorkResult{Err: r.err, Panic: r.panic}
}

// gateDriver is the test client's driver: d with an executor that grants
// one claim only, so that a job the client retries or snoozes for now is not
// run a second time before the client stops.
type gateDriver[TTx any] struct {
	driver.Driver[TTx]
	exec *gateExecutor
}

func (d *gateDriver[TTx]) GetExecutor() driver.Executor { return d.exec }

// gateExecutor passes every statement through, except that JobClaim claims
// one job at most, once.
type gateExecutor struct {
	driver.Executor
	recorder resultRecorder

	mu        sync.Mutex
	claimed   *leasetype.JobRow
	claimedCh chan struct{} // closed when claimed is set
}

func (e *gateExecutor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.claimed != nil {
		return nil, nil
	}
	p := *params
	p.Max = 1
	rows, err := e.Executor.JobClaim(ctx, &p)
	if err != nil {
		return nil, err
	}
	if len(rows) > 0 {
		e.claimed = rows[0]
		close(e.claimedCh)
	}
	return rows, nil
}

func (e *gateExecutor) claimedRow() *leasetype.JobRow {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.claimed
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
