package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientCompleteTx: CompleteTx commits the business write and the
// completion together, or neither.
func testClientCompleteTx[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	if err := env.exec.Exec(ctx, "CREATE TABLE drivertest_ledger (job_id BIGINT PRIMARY KEY, note TEXT NOT NULL)"); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		client, err := leasehold.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		tx, err := b.BeginTx(ctx, env.d)
		if err != nil {
			return err
		}
		defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
		stmt := "INSERT INTO drivertest_ledger (job_id, note) VALUES (" + itoa(j.ID) + ", 'charged')"
		if err := env.d.UnwrapExecutor(tx).Exec(ctx, stmt); err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
			return err
		}
		if j.Args.Name == "rollback" && j.Attempt == 1 {
			return errors.New("rolled back after CompleteTx")
		}
		return b.CommitTx(ctx, tx)
	}))
	c := env.client(nil, leasehold.Config{Workers: w})
	committed := insert(t, c, testArgs{Name: "commit"}, nil)
	rolledBack := insert(t, c, testArgs{Name: "rollback"}, nil)

	env.waitState(committed.ID, leasetype.JobStateCompleted, 10*time.Second)
	env.waitState(rolledBack.ID, leasetype.JobStateCompleted, 10*time.Second)
	if got := env.outcomes(committed.ID); len(got) != 1 || got[0] != leasetype.OutcomeCompleted {
		t.Fatalf("committed job outcomes = %v, want one completed", got)
	}
	// The first attempt's completion and ledger row rolled back together;
	// the retry wrote both.
	if got := env.outcomes(rolledBack.ID); len(got) != 2 || got[0] != leasetype.OutcomeFailed || got[1] != leasetype.OutcomeCompleted {
		t.Fatalf("rolled-back job outcomes = %v, want [failed completed]", got)
	}
	if err := env.exec.Exec(ctx, "DELETE FROM drivertest_ledger WHERE job_id IN ("+itoa(committed.ID)+", "+itoa(rolledBack.ID)+")"); err != nil {
		t.Fatal(err)
	}
	// CompleteTx outside a live lease is refused.
	tx, err := b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.RollbackTx(ctx, tx) //nolint:errcheck
	stale := env.job(committed.ID)
	if err := c.CompleteTx(ctx, tx, stale); !leasehold.IsLeaseLost(err) {
		t.Fatalf("CompleteTx on a completed job = %v, want a lease-lost error", err)
	}
}

// testClientCompleteTxConfirmed: a handler that returns nil after a
// committed CompleteTx has no outcome written by the client (the
// completion is in its transaction); the client confirms the commits with
// batched reads and counts them only then. A CompleteTx whose transaction
// rolled back while the handler returned nil does not lose the job: it is
// retried, and its business write with it.
func testClientCompleteTxConfirmed[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	if err := env.exec.Exec(ctx, "CREATE TABLE drivertest_confirmed (job_id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	fd := newFaultDriver(env.d)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		client, err := leasehold.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		tx, err := b.BeginTx(ctx, env.d)
		if err != nil {
			return err
		}
		defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
		if err := env.d.UnwrapExecutor(tx).Exec(ctx, "INSERT INTO drivertest_confirmed (job_id) VALUES ("+itoa(j.ID)+")"); err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
			return err
		}
		if j.Args.Name == "rollback" && j.Attempt == 1 {
			// A handler bug: the transaction is dropped, yet it reports
			// success.
			return b.RollbackTx(ctx, tx)
		}
		return b.CommitTx(ctx, tx)
	}))
	c := env.client(fd, leasehold.Config{Workers: w})
	completed, cancel, err := c.Subscribe(leasehold.EventKindJobCompleted)
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	const n = 20
	var jobs []*leasetype.JobRow
	for range n {
		jobs = append(jobs, insert(t, c, testArgs{Name: "commit"}, nil))
	}
	rolledBack := insert(t, c, testArgs{Name: "rollback"}, nil)
	for _, j := range append(jobs, rolledBack) {
		env.waitState(j.ID, leasetype.JobStateCompleted, 10*time.Second)
	}
	// A loaded database may fail a handler's transaction now and then
	// (a lock wait timeout): such an attempt fails and is retried.
	waitFor(t, 5*time.Second, func() bool { s := c.Stats(); return s.Completed == n+1 && s.Failed >= 1 },
		func() string {
			var failures []string
			for _, j := range append(jobs, rolledBack) {
				for _, a := range env.attempts(j.ID) {
					if a.Outcome != leasetype.OutcomeCompleted {
						failures = append(failures, fmt.Sprintf("job %d attempt %d: %s", j.ID, a.Attempt, a.Error))
					}
				}
			}
			return fmt.Sprintf("stats %+v, want %d completed and at least 1 failed; failed attempts: %v", c.Stats(), n+1, failures)
		})
	if s := c.Stats(); s.AmbiguousCommits != 0 || s.LeasesLost != 0 || s.FencedWrites != 0 {
		t.Fatalf("stats %+v: want no ambiguous commit, lost lease or fenced write", s)
	}
	// The only outcomes the client wrote itself are the failures (the
	// rolled-back attempt's, and any a loaded database caused): every
	// completion was in a handler's transaction.
	failed := c.Stats().Failed
	if got := fd.finishItems.Load(); got != failed {
		t.Fatalf("outcomes written by the client = %d, want %d (the failed attempts'); CompleteTx completions need none", got, failed)
	}
	if got := fd.leaseReads.Load(); got < 1 || got > n+2 {
		t.Fatalf("confirming reads = %d, want between 1 and %d", got, n+2)
	}
	for _, j := range jobs {
		if got := env.outcomes(j.ID); len(got) == 0 || got[len(got)-1] != leasetype.OutcomeCompleted || slices.Contains(got[:len(got)-1], leasetype.OutcomeCompleted) {
			t.Fatalf("job %d outcomes = %v, want completed once, last", j.ID, got)
		}
	}
	if got := env.outcomes(rolledBack.ID); len(got) < 2 || got[0] != leasetype.OutcomeFailed || got[len(got)-1] != leasetype.OutcomeCompleted || slices.Contains(got[:len(got)-1], leasetype.OutcomeCompleted) {
		t.Fatalf("rolled-back job outcomes = %v, want [failed ... completed]: retried after its transaction rolled back", got)
	}
	if a := env.attempts(rolledBack.ID); !strings.Contains(a[0].Error, "did not commit") {
		t.Fatalf("rolled-back attempt's error = %q, want it to say the transaction did not commit", a[0].Error)
	}
	seen := 0
	for seen < n+1 {
		select {
		case <-completed:
			seen++
		case <-time.After(5 * time.Second):
			t.Fatalf("completed events = %d, want %d", seen, n+1)
		}
	}
}

// testClientInsertTx: a job inserted in a rolled-back transaction never
// exists; one in a committed transaction is worked.
func testClientInsertTx[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	var ranRolledBack atomic.Bool
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		if j.Args.Name == "rolled back" {
			ranRolledBack.Store(true)
		}
		return nil
	}))
	c := env.client(nil, leasehold.Config{Workers: w})

	tx, err := b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := c.InsertTx(ctx, tx, testArgs{Name: "rolled back"}, nil)
	if err != nil {
		t.Fatalf("InsertTx: %v", err)
	}
	if err := b.RollbackTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JobGet(ctx, gone.Job.ID); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("job from a rolled-back transaction: JobGet = %v, want ErrNotFound", err)
	}

	tx, err = b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.InsertManyTx(ctx, tx, []leasehold.InsertManyParams{{Args: testArgs{Name: "a"}}, {Args: testArgs{Name: "b"}}})
	if err != nil {
		t.Fatalf("InsertManyTx: %v", err)
	}
	if err := b.CommitTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		env.waitState(r.Job.ID, leasetype.JobStateCompleted, 5*time.Second)
	}
	if ranRolledBack.Load() {
		t.Fatalf("the job inserted in a rolled-back transaction ran")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// testClientResolveStuckTx: a reconciler's business write and the stuck
// job's resolution commit together or not at all.
func testClientResolveStuckTx[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	c := env.client(nil, leasehold.Config{})
	job := insert(t, c, testArgs{Name: "charge"}, &leasehold.InsertOpts{LeaseTTL: 200 * time.Millisecond})
	// A worker claims it under the stuck policy and vanishes.
	if _, err := env.exec.JobClaim(ctx, &driver.JobClaimParams{Queue: leasehold.DefaultQueue, Max: 1, Owner: "gone",
		DefaultLeaseTTL: time.Minute, StuckKinds: []string{testArgs{}.Kind()}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool {
		if _, err := env.exec.JobExpire(ctx, &driver.JobExpireParams{Limit: 10}); err != nil {
			t.Fatal(err)
		}
		return env.job(job.ID).State == leasetype.JobStateStuck
	}, func() string { return "job never stuck" })
	if err := env.exec.Exec(ctx, "CREATE TABLE drivertest_settled (job_id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	settle := func(commit bool) error {
		tx, err := b.BeginTx(ctx, env.d)
		if err != nil {
			t.Fatal(err)
		}
		defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
		if err := env.d.UnwrapExecutor(tx).Exec(ctx, "INSERT INTO drivertest_settled (job_id) VALUES ("+itoa(job.ID)+")"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ResolveStuckTx(ctx, tx, job.ID, leasehold.ResolveSucceeded, "provider says charged"); err != nil {
			return err
		}
		if commit {
			return b.CommitTx(ctx, tx)
		}
		return nil
	}
	if err := settle(false); err != nil {
		t.Fatalf("ResolveStuckTx, rolled back: %v", err)
	}
	if row := env.job(job.ID); row.State != leasetype.JobStateStuck {
		t.Fatalf("after a rolled-back resolution the job is %s, want stuck", row.State)
	}
	if err := settle(true); err != nil {
		t.Fatalf("ResolveStuckTx, committed: %v", err)
	}
	row := env.job(job.ID)
	if row.State != leasetype.JobStateCompleted || row.LastError != "provider says charged" {
		t.Fatalf("after a committed resolution: %s %q; want completed with the note", row.State, row.LastError)
	}
	// The second settle could insert the business row only because the
	// first one's insert rolled back with its resolution; the committed row
	// is there now, so inserting it again violates its primary key.
	if err := env.exec.Exec(ctx, "INSERT INTO drivertest_settled (job_id) VALUES ("+itoa(job.ID)+")"); err == nil {
		t.Fatalf("the committed business row is missing")
	}
	tx, err := b.BeginTx(ctx, env.d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.RollbackTx(ctx, tx) //nolint:errcheck
	if _, err := c.ResolveStuckTx(ctx, tx, job.ID, leasehold.ResolveRetry, ""); !errors.Is(err, leasehold.ErrJobState) {
		t.Fatalf("resolving a completed job = %v, want ErrJobState", err)
	}
}
