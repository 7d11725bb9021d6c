package drivertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// blockArgs is a job whose handler blocks until the test lets it go.
type blockArgs struct {
	Name string `json:"name"`
}

func (blockArgs) Kind() string { return "drivertest_block" }

// blockWorker runs blockArgs: it reports each start, then waits for release
// (ignoring its context when ignoreCtx, as a paused process would) and returns
// the result of finish.
type blockWorker struct {
	log       *runLog
	started   chan *leasehold.Job[blockArgs]
	release   chan struct{}
	closeOnce sync.Once
	ignoreCtx bool
	ctxCause  chan error
	finish    func(ctx context.Context, j *leasehold.Job[blockArgs]) error
}

// newBlockWorker returns a worker whose handlers are released at the end of
// the test at the latest, so that a failed test never leaves one blocked.
func newBlockWorker(t *testing.T, ignoreCtx bool) *blockWorker {
	w := &blockWorker{log: newRunLog(), started: make(chan *leasehold.Job[blockArgs], 100), release: make(chan struct{}),
		ignoreCtx: ignoreCtx, ctxCause: make(chan error, 100)}
	t.Cleanup(w.releaseAll)
	return w
}

// releaseAll lets every current and future handler finish.
func (w *blockWorker) releaseAll() { w.closeOnce.Do(func() { close(w.release) }) }

func (w *blockWorker) Work(ctx context.Context, j *leasehold.Job[blockArgs]) error {
	w.log.add(j.JobRow)
	w.started <- j
	if w.ignoreCtx {
		select {
		case <-w.release:
		case <-ctx.Done():
			w.ctxCause <- context.Cause(ctx)
			<-w.release
		}
	} else {
		select {
		case <-w.release:
		case <-ctx.Done():
			w.ctxCause <- context.Cause(ctx)
			return ctx.Err()
		}
	}
	if w.finish != nil {
		return w.finish(ctx, j)
	}
	return nil
}

func workersFor(w leasehold.Worker[blockArgs], opts *leasehold.WorkerOpts) *leasehold.Workers {
	ws := leasehold.NewWorkers()
	leasehold.AddWorkerWithOpts(ws, w, opts)
	return ws
}

func recvJob(t *testing.T, ch chan *leasehold.Job[blockArgs], timeout time.Duration) *leasehold.Job[blockArgs] {
	t.Helper()
	select {
	case j := <-ch:
		return j
	case <-time.After(timeout):
		t.Fatalf("no job started within %s", timeout)
		return nil
	}
}

// testClientPausedPastLease: a worker that pauses past its lease is fenced.
// Its handler's context is cancelled with a lease-lost cause, another client
// takes and completes the job with a higher token, and when the paused one
// wakes up and finishes, its completion writes nothing.
func testClientPausedPastLease[TTx any](t *testing.T, b Backend[TTx]) {
	for _, viaTx := range []bool{false, true} {
		name := "AsyncCompletion"
		if viaTx {
			name = "CompleteTx"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := newClientEnv(t, b)
			ttl := 600 * time.Millisecond
			fd := newFaultDriver(env.d)
			slow := newBlockWorker(t, true)
			var txErr error
			txDone := make(chan struct{})
			if viaTx {
				slow.finish = func(ctx context.Context, j *leasehold.Job[blockArgs]) error {
					defer close(txDone)
					client, err := leasehold.ClientFromContext[TTx](ctx)
					if err != nil {
						return err
					}
					tx, err := b.BeginTx(context.Background(), env.d)
					if err != nil {
						return err
					}
					defer b.RollbackTx(context.Background(), tx) //nolint:errcheck
					if txErr = client.CompleteTx(context.Background(), tx, j.JobRow); txErr != nil {
						return txErr
					}
					return b.CommitTx(context.Background(), tx)
				}
			}
			a := env.client(fd, leasehold.Config{ID: "paused", LeaseTTL: ttl, Workers: workersFor(slow, nil)})
			job := insert(t, a, blockArgs{Name: "pause"}, nil)
			first := recvJob(t, slow.started, 5*time.Second)
			if first.Token() != 1 {
				t.Fatalf("first lease token = %d, want 1", first.Token())
			}

			// The worker pauses: nothing it sends reaches the database.
			fd.set(faultBlackhole)
			select {
			case cause := <-slow.ctxCause:
				if !leasehold.IsLeaseLost(cause) {
					t.Fatalf("handler context cause = %v, want a lease-lost error", cause)
				}
			case <-time.After(2 * ttl):
				t.Fatalf("handler context not cancelled within 2×TTL of the pause")
			}

			fast := newBlockWorker(t, false)
			fast.releaseAll()
			bClient := env.client(nil, leasehold.Config{ID: "healthy", LeaseTTL: ttl, Workers: workersFor(fast, nil)})
			row := env.waitState(job.ID, leasetype.JobStateCompleted, 10*time.Second)
			if row.LeaseToken != 2 || row.LeaseOwner != bClient.Owner() {
				t.Fatalf("completed by token %d owner %q, want token 2 owner %q", row.LeaseToken, row.LeaseOwner, bClient.Owner())
			}

			// The paused worker wakes up and finishes its work.
			fd.set(faultNone)
			slow.releaseAll()
			if viaTx {
				<-txDone
				var lle *leasehold.LeaseLostError
				if !errors.As(txErr, &lle) || lle.JobID != job.ID || lle.Token != 1 {
					t.Fatalf("CompleteTx of the paused worker = %v, want *LeaseLostError for job %d token 1", txErr, job.ID)
				}
			}
			waitFor(t, 5*time.Second, func() bool { return a.Stats().FencedWrites >= 1 },
				func() string { return "paused worker's fenced write not counted" })

			row = env.job(job.ID)
			if row.State != leasetype.JobStateCompleted || row.LeaseToken != 2 || row.Expiries != 1 || row.Errors != 0 {
				t.Fatalf("after the stale completion: state %s token %d expiries %d errors %d; want completed, 2, 1, 0",
					row.State, row.LeaseToken, row.Expiries, row.Errors)
			}
			got := env.attempts(job.ID)
			if len(got) != 2 || got[0].Outcome != leasetype.OutcomeLeaseExpired || got[0].Token != 1 || got[0].Owner != a.Owner() ||
				got[1].Outcome != leasetype.OutcomeCompleted || got[1].Token != 2 || got[1].Owner != bClient.Owner() {
				t.Fatalf("attempts = %+v, want [lease_expired token 1 by paused, completed token 2 by healthy]", got)
			}
		})
	}
}

// testClientCrashRecovery: the jobs of a client that vanishes (no more
// heartbeats, no outcomes) are running again elsewhere within their TTL plus
// about a second, with the default expirer interval (WatcherInterval); the expiry is not
// counted as an error.
func testClientCrashRecovery[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ttl := time.Second
	fd := newFaultDriver(env.d)
	crashing := newBlockWorker(t, false)
	a := env.client(fd, leasehold.Config{ID: "crashing", LeaseTTL: ttl, Workers: workersFor(crashing, nil)})
	var ids []int64
	for range 5 {
		ids = append(ids, insert(t, a, blockArgs{Name: "crash"}, nil).ID)
	}
	for range ids {
		recvJob(t, crashing.started, 5*time.Second)
	}
	healthy := newBlockWorker(t, false)
	healthy.releaseAll()
	bClient := env.client(nil, leasehold.Config{ID: "survivor", LeaseTTL: ttl, WatcherInterval: time.Second, Workers: workersFor(healthy, nil)})

	crashAt := time.Now()
	fd.set(faultPartition)
	for _, id := range ids {
		row := env.waitState(id, leasetype.JobStateCompleted, 10*time.Second)
		runs := healthy.log.get(id)
		if len(runs) != 1 {
			t.Fatalf("job %d ran %d times on the survivor, want 1", id, len(runs))
		}
		// TTL plus the expirer interval (1 s) at most, plus room for a
		// loaded test machine.
		took := runs[0].at.Sub(crashAt)
		if took > ttl+2*time.Second {
			t.Fatalf("job %d running again %s after the crash, want within TTL (%s) + ~1 s", id, took, ttl)
		}
		t.Logf("job %d running again %s after the crash (TTL %s)", id, took, ttl)
		if row.Expiries != 1 || row.Errors != 0 || row.LeaseOwner != bClient.Owner() {
			t.Fatalf("job %d: expiries %d errors %d owner %q; want 1, 0, survivor", id, row.Expiries, row.Errors, row.LeaseOwner)
		}
		if got := env.outcomes(id); !slices.Equal(got, []leasetype.AttemptOutcome{leasetype.OutcomeLeaseExpired, leasetype.OutcomeCompleted}) {
			t.Fatalf("job %d outcomes = %v", id, got)
		}
	}
}

// testClientStuckPolicy: a kind whose expiry policy is stuck is not re-run
// after its worker vanishes; it waits in stuck until resolved.
func testClientStuckPolicy[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ttl := 500 * time.Millisecond
	fd := newFaultDriver(env.d)
	crashing := newBlockWorker(t, false)
	stuckOpts := &leasehold.WorkerOpts{ExpiryPolicy: leasetype.ExpiryStuck}
	a := env.client(fd, leasehold.Config{ID: "crashing", LeaseTTL: ttl, Workers: workersFor(crashing, stuckOpts)})
	job := insert(t, a, blockArgs{Name: "charge"}, nil)
	recvJob(t, crashing.started, 5*time.Second)
	if row := env.job(job.ID); row.ExpiryPolicy != leasetype.ExpiryStuck {
		t.Fatalf("claimed job's expiry policy = %q, want stuck", row.ExpiryPolicy)
	}
	healthy := newBlockWorker(t, false)
	healthy.releaseAll()
	// The survivor runs the retry policy for this kind: the policy recorded
	// at claim time, by the worker that ran it, is the one that applies.
	bClient := env.client(nil, leasehold.Config{ID: "survivor", LeaseTTL: ttl, Workers: workersFor(healthy, nil)})
	fd.set(faultPartition)

	row := env.waitState(job.ID, leasetype.JobStateStuck, 5*time.Second)
	if row.Expiries != 1 || row.LastError == "" {
		t.Fatalf("stuck job: expiries %d, last error %q", row.Expiries, row.LastError)
	}
	time.Sleep(3 * ttl)
	if n := healthy.log.count(job.ID); n != 0 {
		t.Fatalf("stuck job ran %d times on the survivor, want 0", n)
	}
	if _, err := bClient.ResolveStuck(context.Background(), job.ID, "maybe", ""); !errors.Is(err, leasehold.ErrInvalidArgs) {
		t.Fatalf("ResolveStuck with a bad resolution = %v, want ErrInvalidArgs", err)
	}
	if _, err := bClient.ResolveStuck(context.Background(), job.ID, leasehold.ResolveRetry, "provider never saw it"); err != nil {
		t.Fatalf("ResolveStuck: %v", err)
	}
	env.waitState(job.ID, leasetype.JobStateCompleted, 5*time.Second)
	if _, err := bClient.ResolveStuck(context.Background(), job.ID, leasehold.ResolveSucceeded, ""); !errors.Is(err, leasehold.ErrJobState) {
		t.Fatalf("ResolveStuck of a completed job = %v, want ErrJobState", err)
	}
}
