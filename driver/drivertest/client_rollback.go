package drivertest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientFencedAfterRollback: a failover rolls the database back and
// the jobs a client is running are claimed again by another client with
// the same token numbers. The first client's renewal, completion and
// CompleteTx are all refused, its handlers are told the lease is lost, and
// nothing it writes lands; the new holder's writes with the same token
// numbers do.
func testClientFencedAfterRollback[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	var (
		started      = make(chan *leasetype.JobRow, 2)
		causes       = make(chan error, 1)
		proceed      = make(chan struct{})
		completeErrs = make(chan error, 1)
	)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		started <- j.JobRow
		if j.Args.Name == "renews" {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		}
		<-proceed
		client, err := leasehold.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		tx, err := b.BeginTx(ctx, env.d)
		if err != nil {
			return err
		}
		defer b.RollbackTx(ctx, tx) //nolint:errcheck // no-op after commit
		err = client.CompleteTx(ctx, tx, j.JobRow)
		completeErrs <- err
		if err != nil {
			return err
		}
		return b.CommitTx(ctx, tx)
	}))
	c := env.client(nil, leasehold.Config{Workers: w})
	insert(t, c, testArgs{Name: "renews"}, &leasehold.InsertOpts{LeaseTTL: 900 * time.Millisecond})
	insert(t, c, testArgs{Name: "completes"}, &leasehold.InsertOpts{LeaseTTL: time.Minute})
	var held []*leasetype.JobRow
	for range 2 {
		select {
		case row := <-started:
			held = append(held, row)
		case <-time.After(10 * time.Second):
			t.Fatalf("the jobs did not start")
		}
	}

	// The failover: both jobs are issued again, with the same token
	// numbers, to another client, which renews them.
	const other = "other-client-after-failover"
	var reclaimed []*leasetype.JobRow
	for _, row := range held {
		reclaimWithSameToken(t, env.exec, row, other)
		renewed, err := env.exec.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Owner: other,
			Leases: []driver.LeaseRenewal{{ID: row.ID, Token: row.LeaseToken, TTL: time.Minute}}})
		if err != nil || len(renewed) != 1 {
			t.Fatalf("the new holder's renewal of job %d: %v, %v; want it renewed", row.ID, renewed, err)
		}
		reclaimed = append(reclaimed, env.job(row.ID))
	}

	select {
	case cause := <-causes:
		if !leasehold.IsLeaseLost(cause) {
			t.Fatalf("handler's context cause = %v, want a lease-lost error (renewal refused)", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the stale holder's handler was not cancelled: its renewal was not refused")
	}
	close(proceed)
	select {
	case err := <-completeErrs:
		if !leasehold.IsLeaseLost(err) {
			t.Fatalf("stale holder's CompleteTx = %v, want a lease-lost error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the CompleteTx handler did not finish")
	}
	// The stale holder's outcome writes come after its handlers return;
	// give them time to be refused.
	waitFor(t, 5*time.Second, func() bool { return c.Stats().LeasesLost >= 2 },
		func() string { return fmt.Sprintf("stats %+v, want two leases lost", c.Stats()) })
	time.Sleep(200 * time.Millisecond)
	for _, row := range reclaimed {
		assertUnchanged(t, env.exec, fmt.Sprintf("job %d held by the new holder", row.ID), row)
		if got := env.attempts(row.ID); len(got) != 0 {
			t.Fatalf("job %d: attempts %+v, want none from the stale holder", row.ID, got)
		}
	}
	if s := c.Stats(); s.Completed != 0 || s.Failed != 0 {
		t.Fatalf("stale holder's stats: completed %d failed %d, want 0 and 0", s.Completed, s.Failed)
	}

	// The new holder completes with the same token numbers.
	items := make([]*driver.JobFinish, len(reclaimed))
	for i, row := range reclaimed {
		items[i] = completeItem(row)
	}
	written, err := env.exec.JobFinish(ctx, &driver.JobFinishParams{Owner: other, Items: items})
	if err != nil || len(written) != 2 {
		t.Fatalf("the new holder's completion: %v, %v; want both written", written, err)
	}
	for _, row := range reclaimed {
		if got := env.attempts(row.ID); len(got) != 1 || got[0].Owner != other || got[0].Token != row.LeaseToken {
			t.Fatalf("job %d: attempts %+v, want one by %s with token %d", row.ID, got, other, row.LeaseToken)
		}
	}
}

// testClientCompleteTxBounded: a handler that stalls between CompleteTx
// and COMMIT does not hold its job past the lease. Its transaction is
// aborted (by the database where the driver bounds it, by the cancelled
// handler context with database/sql otherwise), its COMMIT fails, and the
// job is reclaimed and runs again exactly once.
func testClientCompleteTxBounded[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	if err := env.exec.Exec(ctx, "CREATE TABLE drivertest_bounded (job_id BIGINT PRIMARY KEY)"); err != nil {
		t.Fatalf("create business table: %v", err)
	}
	const ttl = time.Second
	commits := make(chan error, 4)
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
		// The primary key admits one business row per job: a second
		// attempt's insert fails unless the first one's rolled back.
		if err := env.d.UnwrapExecutor(tx).Exec(ctx, "INSERT INTO drivertest_bounded (job_id) VALUES ("+itoa(j.ID)+")"); err != nil {
			return err
		}
		if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
			return err
		}
		if j.Attempt == 1 {
			time.Sleep(ttl * 3 / 2) // stalled, ignoring its context
		}
		err = b.CommitTx(ctx, tx)
		commits <- err
		return err
	}))
	c := env.client(nil, leasehold.Config{Workers: w})
	job := insert(t, c, testArgs{Name: "stalls"}, &leasehold.InsertOpts{LeaseTTL: ttl})

	env.waitState(job.ID, leasetype.JobStateCompleted, 15*time.Second)
	var errs []error
	waitFor(t, 10*time.Second, func() bool {
		for {
			select {
			case err := <-commits:
				errs = append(errs, err)
				continue
			default:
			}
			return len(errs) >= 2
		}
	}, func() string { return fmt.Sprintf("commits %v, want two", errs) })
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if len(errs) != 2 || failed != 1 {
		t.Fatalf("commits = %v, want the stalled one failed and the retry's committed", errs)
	}
	if got := env.outcomes(job.ID); len(got) != 2 || got[0] != leasetype.OutcomeLeaseExpired || got[1] != leasetype.OutcomeCompleted {
		t.Fatalf("outcomes = %v, want [lease_expired completed]", got)
	}
	if row := env.job(job.ID); row.Attempt != 2 {
		t.Fatalf("attempts = %d, want 2: the job ran again exactly once", row.Attempt)
	}
}

// testClientAmbiguousCommit: an outcome whose commit the client could not
// see (the handler reports an error after its CompleteTx transaction
// committed; the reply to the client's own outcome write is lost) is read
// back and counted as what it was, not as a lost lease.
func testClientAmbiguousCommit[TTx any](t *testing.T, b Backend[TTx]) {
	t.Run("CompleteTx", func(t *testing.T) {
		env := newClientEnv(t, b)
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
			if err := client.CompleteTx(ctx, tx, j.JobRow); err != nil {
				return err
			}
			if err := b.CommitTx(ctx, tx); err != nil {
				return err
			}
			// What a handler sees when the connection drops during a
			// COMMIT that the server carried out.
			return errors.New("commit: connection reset by peer")
		}))
		c := env.client(nil, leasehold.Config{Workers: w})
		job := insert(t, c, testArgs{Name: "ambiguous"}, nil)
		env.waitState(job.ID, leasetype.JobStateCompleted, 10*time.Second)
		waitFor(t, 5*time.Second, func() bool { return c.Stats().AmbiguousCommits == 1 },
			func() string { return fmt.Sprintf("stats %+v, want one ambiguous commit", c.Stats()) })
		if s := c.Stats(); s.Completed != 1 || s.Failed != 0 || s.LeasesLost != 0 || s.FencedWrites != 0 {
			t.Fatalf("stats %+v: want completed 1, failed 0, leases lost 0, fenced writes 0", s)
		}
		if got := env.outcomes(job.ID); len(got) != 1 || got[0] != leasetype.OutcomeCompleted {
			t.Fatalf("outcomes = %v, want one completed", got)
		}
	})

	t.Run("LostReply", func(t *testing.T) {
		env := newClientEnv(t, b)
		fd := newFaultDriver(env.d)
		fd.lostReplies.Store(1)
		w := leasehold.NewWorkers()
		leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
			if j.Attempt == 1 {
				return errors.New("fails once")
			}
			return nil
		}))
		c := env.client(fd, leasehold.Config{Workers: w})
		job := insert(t, c, testArgs{Name: "lost reply"}, nil)
		env.waitState(job.ID, leasetype.JobStateCompleted, 10*time.Second)
		waitFor(t, 5*time.Second, func() bool { s := c.Stats(); return s.Completed == 1 && s.Failed == 1 },
			func() string { return fmt.Sprintf("stats %+v, want one failure and one completion", c.Stats()) })
		if s := c.Stats(); s.AmbiguousCommits != 1 || s.LeasesLost != 0 {
			t.Fatalf("stats %+v: want ambiguous commits 1 and leases lost 0", s)
		}
		if got := env.outcomes(job.ID); len(got) != 2 || got[0] != leasetype.OutcomeFailed || got[1] != leasetype.OutcomeCompleted {
			t.Fatalf("outcomes = %v, want [failed completed]", got)
		}
	})
}

// testClientReclaimedBySameClient: a failover forgets the claim of a job
// that a client is running, and the same client claims the job again, with
// the same token number and its own owner: fencing cannot tell the two
// leases apart. The client sees it holds the job twice: the older handler
// is cancelled with a lease-lost error and nothing it writes lands, even a
// CompleteTx that the database would accept; the newer one completes the
// job once.
func testClientReclaimedBySameClient[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ctx := context.Background()
	var (
		runs      = make(chan *leasetype.JobRow, 2)
		started   atomic.Int32
		firstDone = make(chan struct{})
		firstErrs = make(chan error, 2)
	)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[testArgs](func(ctx context.Context, j *leasehold.Job[testArgs]) error {
		runs <- j.JobRow
		if started.Add(1) > 1 {
			<-firstDone
			return nil
		}
		defer close(firstDone)
		<-ctx.Done()
		firstErrs <- context.Cause(ctx)
		client, err := leasehold.ClientFromContext[TTx](ctx)
		if err != nil {
			return err
		}
		tx, err := b.BeginTx(context.Background(), env.d)
		if err != nil {
			return err
		}
		defer b.RollbackTx(context.Background(), tx) //nolint:errcheck // no-op after commit
		err = client.CompleteTx(context.Background(), tx, j.JobRow)
		firstErrs <- err
		if err == nil {
			_ = b.CommitTx(context.Background(), tx)
		}
		return nil // a handler that ignores the loss: its completion must not land either
	}))
	c := env.client(nil, leasehold.Config{Workers: w})
	job := insert(t, c, testArgs{Name: "forgotten"}, &leasehold.InsertOpts{LeaseTTL: time.Minute})
	var first *leasetype.JobRow
	select {
	case first = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatalf("the job did not start")
	}
	// The failover: the new primary never saw the claim.
	if err := env.exec.Exec(ctx, fmt.Sprintf("UPDATE leasehold_job SET state = 'available', lease_token = lease_token - 1, attempt = attempt - 1 WHERE id = %d", job.ID)); err != nil {
		t.Fatalf("forget the claim by SQL: %v", err)
	}
	var second *leasetype.JobRow
	select {
	case second = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatalf("the job was not claimed again")
	}
	if second.LeaseToken != first.LeaseToken || second.LeaseOwner != first.LeaseOwner {
		t.Fatalf("second grant: token %d owner %q, want the first's %d %q", second.LeaseToken, second.LeaseOwner, first.LeaseToken, first.LeaseOwner)
	}
	for _, what := range []string{"older handler's context cause", "older handler's CompleteTx"} {
		select {
		case err := <-firstErrs:
			if !leasehold.IsLeaseLost(err) {
				t.Fatalf("%s = %v, want a lease-lost error", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: nothing after 10 s", what)
		}
	}
	env.waitState(job.ID, leasetype.JobStateCompleted, 10*time.Second)
	if got := env.attempts(job.ID); len(got) != 1 || got[0].Outcome != leasetype.OutcomeCompleted || got[0].Token != second.LeaseToken {
		t.Fatalf("attempts = %+v, want one completed, by the second grant", got)
	}
	time.Sleep(100 * time.Millisecond)
	if s := c.Stats(); s.Completed != 1 || s.LeasesLost != 1 {
		t.Fatalf("stats %+v: want completed 1 and leases lost 1", s)
	}
}
