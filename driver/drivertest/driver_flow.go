package drivertest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// lockHold is how long the first of two transactions keeps its limit rows
// locked while the second waits for them. Long enough to tell waiting from
// not waiting on a loaded machine, short enough to keep the suite fast.
const lockHold = 300 * time.Millisecond

// exerciseFlow specifies the statements behind flow control: the claim's
// kind filters, JobCountRunning, and the limit rows (LimitLock,
// LimitSetWindow) that serialise the claims of a limited queue or kind.
func exerciseFlow[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("ClaimKinds", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		rows := mustInsert(t, exec, jobParams("a", "q"), jobParams("b", "q"), jobParams("c", "q"), jobParams("a", "q"))
		mustInsertOne(t, exec, jobParams("a", "q2"))

		one := claimParams("q", "w", 1, longTTL)
		one.Kinds = []string{"a"}
		first := mustClaimOne(t, exec, one)
		if first.ID != rows[0].ID {
			t.Errorf("claim Kinds [a] Max 1: got job %d, want %d (the first of kind a)", first.ID, rows[0].ID)
		}

		p := claimParams("q", "w", 10, longTTL)
		p.Kinds = []string{"a", "c"}
		got := mustClaim(t, exec, p)
		assertSameIDs(t, "claim Kinds [a c] from q", jobIDs(got), []int64{rows[2].ID, rows[3].ID})
		for _, j := range got {
			if j.State != leasetype.JobStateRunning || j.LeaseOwner != "w" || j.LeaseToken != 1 {
				t.Errorf("job %d claimed with a kind filter: state %s owner %q token %d, want running w 1", j.ID, j.State, j.LeaseOwner, j.LeaseToken)
			}
		}

		none := claimParams("q", "w", 10, longTTL)
		none.Kinds = []string{"nope"}
		if got := mustClaim(t, exec, none); len(got) != 0 {
			t.Errorf("claim Kinds [nope]: got %s, want none", describeJobs(got))
		}
		// The b job was never eligible and is still there for a plain claim.
		rest := mustClaim(t, exec, claimParams("q", "w", 10, longTTL))
		assertSameIDs(t, "plain claim after the filtered ones", jobIDs(rest), []int64{rows[1].ID})
	})

	t.Run("ClaimExcludeKinds", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		rows := mustInsert(t, exec, jobParams("a", "q"), jobParams("b", "q"), jobParams("c", "q"))
		p := claimParams("q", "w", 10, longTTL)
		p.ExcludeKinds = []string{"a", "c"}
		got := mustClaim(t, exec, p)
		assertSameIDs(t, "claim ExcludeKinds [a c]", jobIDs(got), []int64{rows[1].ID})
		if again := mustClaim(t, exec, p); len(again) != 0 {
			t.Errorf("second claim ExcludeKinds [a c]: got %s, want none", describeJobs(again))
		}
		rest := mustClaim(t, exec, claimParams("q", "w", 10, longTTL))
		assertSameIDs(t, "plain claim after the excluding one", jobIDs(rest), []int64{rows[0].ID, rows[2].ID})
	})

	t.Run("ClaimKindsAndExcludeKinds", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		rows := mustInsert(t, exec, jobParams("a", "q"), jobParams("b", "q"), jobParams("c", "q"))
		p := claimParams("q", "w", 10, longTTL)
		p.Kinds = []string{"a", "b"}
		p.ExcludeKinds = []string{"b"}
		got := mustClaim(t, exec, p)
		assertSameIDs(t, "claim Kinds [a b] ExcludeKinds [b]", jobIDs(got), []int64{rows[0].ID})
	})

	t.Run("CountRunning", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		// Queue q: three a and two b. Queue q2: two a and one c.
		mustInsert(t, exec, jobParams("a", "q"), jobParams("a", "q"), jobParams("a", "q"), jobParams("b", "q"), jobParams("b", "q"))
		mustInsert(t, exec, jobParams("a", "q2"), jobParams("a", "q2"), jobParams("c", "q2"))

		pa := claimParams("q", "w", 2, longTTL)
		pa.Kinds = []string{"a"}
		if got := mustClaim(t, exec, pa); len(got) != 2 {
			t.Fatalf("claimed %d a jobs from q, want 2", len(got))
		}
		pb := claimParams("q", "w", 1, longTTL)
		pb.Kinds = []string{"b"}
		expiring := shortenLease(t, exec, mustClaimOne(t, exec, pb))
		q2 := mustClaim(t, exec, claimParams("q2", "w", 10, longTTL))
		if len(q2) != 3 {
			t.Fatalf("claimed %d jobs from q2, want 3", len(q2))
		}
		for _, j := range q2 {
			if j.Kind == "a" {
				mustFinish(t, exec, "w", completeItem(j)) // a finished job holds no slot
				break
			}
		}
		// The b job's lease expires; it stays running until JobExpire, and
		// is counted apart.
		waitLeaseExpired(t, exec, expiring)
		// Running with a live lease now: q: a, a; q2: a, c. Expired: q: b.

		count := func(queue string, kinds ...string) *driver.RunningCount {
			t.Helper()
			got, err := exec.JobCountRunning(t.Context(), &driver.JobCountRunningParams{Queue: queue, Kinds: kinds})
			if err != nil {
				t.Fatalf("JobCountRunning(%q, %v): %v", queue, kinds, err)
			}
			if got == nil {
				t.Fatalf("JobCountRunning(%q, %v): nil result", queue, kinds)
			}
			return got
		}
		check := func(got *driver.RunningCount, queue string, wantQueue, wantQueueExpired int64, wantKinds, wantKindsExpired map[string]int64) {
			t.Helper()
			if got.Queue != wantQueue || got.QueueExpired != wantQueueExpired {
				t.Errorf("JobCountRunning(%q): Queue %d, QueueExpired %d; want %d, %d", queue, got.Queue, got.QueueExpired, wantQueue, wantQueueExpired)
			}
			if !maps.Equal(got.Kinds, wantKinds) { // nil and empty are equal here
				t.Errorf("JobCountRunning(%q).Kinds = %v, want %v (every kind asked for has an entry)", queue, got.Kinds, wantKinds)
			}
			if !maps.Equal(got.KindsExpired, wantKindsExpired) {
				t.Errorf("JobCountRunning(%q).KindsExpired = %v, want %v (every kind asked for has an entry)", queue, got.KindsExpired, wantKindsExpired)
			}
		}
		check(count("q", "a", "b", "d"), "q", 2, 1, map[string]int64{"a": 3, "b": 0, "d": 0}, map[string]int64{"a": 0, "b": 1, "d": 0})
		check(count("q2"), "q2", 2, 0, nil, nil)
		check(count("q2", "c"), "q2", 2, 0, map[string]int64{"c": 1}, map[string]int64{"c": 0})
		check(count("empty", "a"), "empty", 0, 0, map[string]int64{"a": 3}, map[string]int64{"a": 0})

		// Reclaiming the expired lease takes it out of the counts; a new
		// claim counts.
		if got := mustExpire(t, exec, &driver.JobExpireParams{Limit: 10}); len(got) != 1 || got[0].ID != expiring.ID {
			t.Fatalf("JobExpire: got %s, want job %d", describeJobs(got), expiring.ID)
		}
		check(count("q", "b"), "q", 2, 0, map[string]int64{"b": 0}, map[string]int64{"b": 0})
		mustClaimOne(t, exec, pb)
		check(count("q", "b"), "q", 3, 0, map[string]int64{"b": 1}, map[string]int64{"b": 0})
	})

	t.Run("LockCreatesRowsInOrder", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		keys := []driver.LimitKey{
			{Scope: driver.LimitScopeKind, Name: "b"},
			{Scope: driver.LimitScopeQueue, Name: "a"},
			{Scope: driver.LimitScopeKind, Name: "a"},
		}
		before := mustNow(t, exec)
		tx := mustBegin(t, exec)
		rows := mustLimitLock(t, tx, keys...)
		// Locking rows the transaction already holds is a no-op, not a deadlock.
		again := mustLimitLock(t, tx, keys[2], keys[0])
		mustCommit(t, tx)
		after := mustNow(t, exec)

		for i, r := range rows {
			if r.WindowStart != nil || r.WindowCount != 0 {
				t.Errorf("new limit row %v: window start %v count %d, want nil and 0", r.Key, r.WindowStart, r.WindowCount)
			}
			assertWithin(t, fmt.Sprintf("row %d Now", i), r.Now, before, after)
		}
		if again[0].Key != keys[2] || again[1].Key != keys[0] {
			t.Errorf("second LimitLock returned keys %v, %v; want %v, %v", again[0].Key, again[1].Key, keys[2], keys[0])
		}

		// The rows persist: a later transaction finds them, in its own order.
		tx = mustBegin(t, exec)
		later := mustLimitLock(t, tx, keys[1], keys[2], keys[0])
		mustCommit(t, tx)
		for i, want := range []driver.LimitKey{keys[1], keys[2], keys[0]} {
			if later[i].Key != want || later[i].WindowStart != nil || later[i].WindowCount != 0 {
				t.Errorf("later LimitLock row %d = %+v, want key %v with no window", i, *later[i], want)
			}
		}
	})

	t.Run("SetWindowRoundTrip", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		kindX := driver.LimitKey{Scope: driver.LimitScopeKind, Name: "x"}
		queueX := driver.LimitKey{Scope: driver.LimitScopeQueue, Name: "x"}

		tx := mustBegin(t, exec)
		rows := mustLimitLock(t, tx, kindX, queueX)
		start := rows[0].Now.Add(-1500 * time.Millisecond).Truncate(time.Microsecond)
		mustLimitSetWindow(t, tx, &driver.LimitSetWindowParams{Key: kindX, WindowStart: start, WindowCount: 3})
		mustCommit(t, tx)

		tx = mustBegin(t, exec)
		rows = mustLimitLock(t, tx, queueX, kindX)
		if rows[1].WindowStart == nil || !rows[1].WindowStart.Equal(start) || rows[1].WindowCount != 3 {
			t.Errorf("kind x after LimitSetWindow: window start %v count %d, want %s and 3", rows[1].WindowStart, rows[1].WindowCount, start)
		}
		if rows[0].WindowStart != nil || rows[0].WindowCount != 0 {
			t.Errorf("queue x (same name, other scope): window start %v count %d, want untouched", rows[0].WindowStart, rows[0].WindowCount)
		}
		// A window written in a transaction that rolls back is not kept.
		mustLimitSetWindow(t, tx, &driver.LimitSetWindowParams{Key: kindX, WindowStart: start.Add(time.Second), WindowCount: 9})
		mustRollback(t, tx)

		tx = mustBegin(t, exec)
		rows = mustLimitLock(t, tx, kindX)
		mustCommit(t, tx)
		if rows[0].WindowStart == nil || !rows[0].WindowStart.Equal(start) || rows[0].WindowCount != 3 {
			t.Errorf("kind x after a rolled-back LimitSetWindow: window start %v count %d, want %s and 3", rows[0].WindowStart, rows[0].WindowCount, start)
		}
	})

	// Two transactions lock the same rows: the second waits for the first
	// to commit. Rows created by the first (still uncommitted) and rows that
	// already exist are both locked: the second case is the steady state,
	// where the insert of missing rows does not wait.
	for _, existing := range []bool{false, true} {
		name := "LockSerialisesTransactionsNewRows"
		if existing {
			name = "LockSerialisesTransactionsExistingRows"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testLimitLockSerialises(t, b.New(t).GetExecutor(), existing)
		})
	}
}

// testLimitLockSerialises runs the LockSerialisesTransactions tests.
func testLimitLockSerialises(t *testing.T, exec driver.Executor, existing bool) {
	t.Helper()
	keys := []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: "q"}, {Scope: driver.LimitScopeKind, Name: "k"}}
	mustInsert(t, exec, jobParams("k", "q"), jobParams("k", "q"))
	if existing {
		tx := mustBegin(t, exec)
		mustLimitLock(t, tx, keys...)
		mustCommit(t, tx)
	}

	// The first transaction locks the rows and claims a job, as a
	// limited claim does.
	tx1 := mustBegin(t, exec)
	mustLimitLock(t, tx1, keys...)
	mustClaimOne(t, tx1, claimParams("q", "first", 1, longTTL))

	type second struct {
		acquired time.Time
		rows     []*driver.LimitRow
		count    *driver.RunningCount
		err      error
	}
	started := make(chan struct{})
	done := make(chan second, 1)
	go func() {
		var r second
		defer func() { done <- r }()
		close(started)
		// On SQLite Begin itself waits for the first transaction.
		tx2, err := exec.Begin(t.Context())
		if err != nil {
			r.err = fmt.Errorf("Begin: %w", err)
			return
		}
		defer tx2.Rollback(t.Context()) //nolint:errcheck // read-only
		// A read before the lock: under REPEATABLE READ it would pin a
		// snapshot that hides the first transaction's claim.
		if _, err := tx2.JobCountRunning(t.Context(), &driver.JobCountRunningParams{Queue: "q", Kinds: []string{"k"}}); err != nil {
			r.err = fmt.Errorf("JobCountRunning before the lock: %w", err)
			return
		}
		if r.rows, err = tx2.LimitLock(t.Context(), &driver.LimitLockParams{Keys: keys}); err != nil {
			r.err = fmt.Errorf("LimitLock: %w", err)
			return
		}
		r.acquired = time.Now()
		if r.count, err = tx2.JobCountRunning(t.Context(), &driver.JobCountRunningParams{Queue: "q", Kinds: []string{"k"}}); err != nil {
			r.err = fmt.Errorf("JobCountRunning after the lock: %w", err)
		}
	}()

	<-started
	time.Sleep(lockHold)
	releasedDB := mustNow(t, exec)
	released := time.Now()
	mustCommit(t, tx1)

	var r second
	select {
	case r = <-done:
	case <-time.After(waitLimit):
		t.Fatalf("the second transaction did not get the limit rows within %s of the first one's commit", waitLimit)
	}
	if r.err != nil {
		t.Fatalf("second transaction: %v", r.err)
	}
	if r.acquired.Before(released) {
		t.Errorf("the second LimitLock returned %s before the first transaction committed: the rows were not locked",
			released.Sub(r.acquired))
	}
	if len(r.rows) != len(keys) || r.rows[0].Key != keys[0] || r.rows[1].Key != keys[1] {
		t.Fatalf("second LimitLock returned %d rows, want %v in order", len(r.rows), keys)
	}
	// Now is read once the lock is held, not when the transaction began.
	if r.rows[0].Now.Before(releasedDB.Add(-clockSlack)) {
		t.Errorf("second LimitLock Now = %s, before the first transaction's commit at %s", r.rows[0].Now, releasedDB)
	}
	// The count after the lock sees the claim the first holder committed.
	if r.count == nil || r.count.Queue != 1 || r.count.Kinds["k"] != 1 {
		t.Errorf("JobCountRunning after the lock = %+v, want queue 1 and kind k 1", r.count)
	}
}

func mustLimitLock(t *testing.T, exec driver.Executor, keys ...driver.LimitKey) []*driver.LimitRow {
	t.Helper()
	rows, err := exec.LimitLock(t.Context(), &driver.LimitLockParams{Keys: keys})
	if err != nil {
		t.Fatalf("LimitLock(%v): %v", keys, err)
	}
	if len(rows) != len(keys) {
		t.Fatalf("LimitLock(%v): got %d rows", keys, len(rows))
	}
	for i, r := range rows {
		if r == nil || r.Key != keys[i] {
			t.Fatalf("LimitLock(%v): row %d is %+v, want key %v (rows in the order given)", keys, i, r, keys[i])
		}
	}
	return rows
}

func mustLimitSetWindow(t *testing.T, exec driver.Executor, p *driver.LimitSetWindowParams) {
	t.Helper()
	if err := exec.LimitSetWindow(t.Context(), p); err != nil {
		t.Fatalf("LimitSetWindow(%v): %v", p.Key, err)
	}
}
