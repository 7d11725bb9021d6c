package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// insertKeyed inserts, in one COPY, perKey jobs for each of keys (key
// "" inserts jobs without a key), key by key.
func insertKeyed(t *testing.T, d *Driver, queue string, keys []string, perKey int) {
	t.Helper()
	var params []*driver.JobInsertParams
	for _, k := range keys {
		for range perKey {
			p := testJob(queue)
			p.Key = k
			params = append(params, p)
		}
	}
	if _, err := d.GetExecutor().JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: params}); err != nil {
		t.Fatalf("insert: %v", err)
	}
}

// claimKeyed runs one keyed claim as a client's limited claim does: in a
// transaction that first locks the queue's limit row.
func claimKeyed(t *testing.T, d *Driver, p *driver.JobClaimKeyedParams) []*leasetype.JobRow {
	t.Helper()
	ctx := t.Context()
	tx, err := d.GetExecutor().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: p.Claim.Queue}}}); err != nil {
		t.Fatalf("lock: %v", err)
	}
	rows, err := tx.JobClaimKeyed(ctx, p)
	if err != nil {
		t.Fatalf("claim keyed: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return rows
}

// TestKeyedClaimPlan guards the keyed claim's plans, custom and generic,
// with statistics taken before any job runs (a backlog inserted and
// analyzed, then drained): it walks the queue's keys and reads their jobs
// by index, it never counts a key's running jobs by scanning the running
// index, which would read every running job of the queue for each key it
// visits, and it never scans the
// job table, not even for a claim of 2,000 rows (locked by ID, they were
// joined to a scan of the whole table). The claim without key limits
// (sequences only) never scans the table either.
func TestKeyedClaimPlan(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("k%02d", i))
	}
	insertKeyed(t, d, "q", keys, 2000)
	if _, err := d.Pool().Exec(ctx, "ANALYZE leasehold_job"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "PREPARE keyed AS "+jobClaimKeyedSQL); err != nil {
		t.Fatalf("prepare keyed claim: %v", err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatalf("set plan_cache_mode: %v", err)
		}
		for _, tc := range []struct {
			name string
			max  int
			args string
		}{
			{"queue key limit", 100, "1, 0, '', '', NULL, 0, true"},
			{"kind key limit", 100, "0, 2, '', '', NULL, 0, true"},
			{"key rate", 100, "0, 0, 'queue', 'q', now(), 3, true"},
			{"large claim", 2000, "1, 0, '', '', NULL, 0, true"},
		} {
			kinds := "{}"
			if tc.name == "kind key limit" {
				kinds = "{test}"
			}
			plan := explain(t, conn, fmt.Sprintf(
				`EXPLAIN EXECUTE keyed('q', %d, 'owner', '{}', '{}', 60000, '{}', '%s', '{}', %s, '{}')`, tc.max, kinds, tc.args))
			if !strings.Contains(plan, "leasehold_queue_key_pkey") {
				t.Errorf("%s, %s: keyed claim does not walk the queue's keys by their index:\n%s", mode, tc.name, plan)
			}
			if !strings.Contains(plan, "leasehold_job_key_claim_idx") {
				t.Errorf("%s, %s: keyed claim does not read a key's jobs from the key index:\n%s", mode, tc.name, plan)
			}
			if strings.Contains(plan, "leasehold_job_running_idx") {
				t.Errorf("%s, %s: keyed claim scans the running index to count a key's running jobs:\n%s", mode, tc.name, plan)
			}
			if hasLine(plan, "Seq Scan on leasehold_job") {
				t.Errorf("%s, %s: keyed claim scans the job table:\n%s", mode, tc.name, plan)
			}
			if tidScanPerRow(plan) {
				t.Errorf("%s, %s: keyed claim finds the locked rows by address one at a time:\n%s", mode, tc.name, plan)
			}
		}
	}
	if _, err := conn.Exec(ctx, "PREPARE sequenced AS "+jobClaimSequencedSQL); err != nil {
		t.Fatalf("prepare sequenced claim: %v", err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatalf("set plan_cache_mode: %v", err)
		}
		plan := explain(t, conn, `EXPLAIN EXECUTE sequenced('q', 2000, 'owner', '{}', '{}', 60000, '{}', '{}', '{}', '{}')`)
		if hasLine(plan, "Seq Scan on leasehold_job") {
			t.Errorf("%s: sequenced claim scans the job table:\n%s", mode, plan)
		}
		if tidScanPerRow(plan) {
			t.Errorf("%s: sequenced claim finds the locked rows by address one at a time:\n%s", mode, plan)
		}
	}
}

// TestKeyedClaimCursorPerStatement: a claim of one kind keeps its walk's
// cursor on the kind's limit row, the queue's other claims on the queue's,
// so that neither walk skips the keys the other one went over.
func TestKeyedClaimCursorPerStatement(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	insertKeyed(t, d, "q", []string{"a", "b", "c", "d"}, 2)
	if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET kind = 'limited' WHERE id % 2 = 0"); err != nil {
		t.Fatalf("set kinds: %v", err)
	}
	tx, err := d.GetExecutor().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{
		{Scope: driver.LimitScopeQueue, Name: "q"}, {Scope: driver.LimitScopeKind, Name: "limited"},
	}}); err != nil {
		t.Fatalf("lock: %v", err)
	}
	claim := &driver.JobClaimParams{Queue: "q", Max: 2, Owner: "w", DefaultLeaseTTL: time.Hour}
	kindClaim := *claim
	kindClaim.Kinds = []string{"limited"}
	if _, err := tx.JobClaimKeyed(ctx, &driver.JobClaimKeyedParams{Claim: &kindClaim, KindKeyLimit: 1, Fair: true}); err != nil {
		t.Fatalf("claim of the kind: %v", err)
	}
	rest := *claim
	rest.Max, rest.ExcludeKinds = 1, []string{"limited"}
	if _, err := tx.JobClaimKeyed(ctx, &driver.JobClaimKeyedParams{Claim: &rest, Fair: true}); err != nil {
		t.Fatalf("claim of the other kinds: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cursors := map[string]string{}
	rows, err := d.Pool().Query(ctx, "SELECT scope, coalesce(key_cursor, '') FROM leasehold_limit")
	if err != nil {
		t.Fatalf("read cursors: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var scope, cursor string
		if err := rows.Scan(&scope, &cursor); err != nil {
			t.Fatalf("scan cursor: %v", err)
		}
		cursors[scope] = cursor
	}
	// The kind's claim of 2 walked a and b; the other claim of 1 walked a
	// alone, from its own cursor (from the kind's it would have started at c).
	if cursors["kind"] != "b" || cursors["queue"] != "a" {
		t.Fatalf("cursors %v, want kind b (its claim walked a, b) and queue a (its claim walked a)", cursors)
	}
}

// TestKeyedClaimPausedQueue: a paused queue yields nothing to the keyed
// claim, keyed jobs and jobs without a key alike, nor to the claim without
// key limits (sequences only); resumed, both claim again.
func TestKeyedClaimPausedQueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	insertKeyed(t, d, "q", []string{"a", "b", ""}, 2)
	exec := d.GetExecutor()
	keyed := &driver.JobClaimKeyedParams{
		Claim: &driver.JobClaimParams{Queue: "q", Max: 10, Owner: "w", DefaultLeaseTTL: time.Hour}, KeyLimit: 1, Fair: true,
	}
	plain := &driver.JobClaimKeyedParams{Claim: &driver.JobClaimParams{Queue: "q", Max: 1, Owner: "w", DefaultLeaseTTL: time.Hour}}
	if err := exec.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "q", Paused: true}); err != nil {
		t.Fatalf("pause: %v", err)
	}
	if rows := claimKeyed(t, d, keyed); len(rows) != 0 {
		t.Fatalf("keyed claim of a paused queue took %d jobs", len(rows))
	}
	if rows := claimKeyed(t, d, plain); len(rows) != 0 {
		t.Fatalf("claim without key limits of a paused queue took %d jobs", len(rows))
	}
	if err := exec.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "q", Paused: false}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	// KeyLimit 1: one job of a and of b, and both jobs without a key.
	if rows := claimKeyed(t, d, keyed); len(rows) != 4 {
		t.Fatalf("keyed claim of the resumed queue took %d jobs, want 4", len(rows))
	}
	if rows := claimKeyed(t, d, plain); len(rows) != 1 {
		t.Fatalf("claim without key limits of the resumed queue took %d jobs, want 1", len(rows))
	}
}

// queueKeys lists the rows of leasehold_queue_key as "queue/key".
func queueKeys(t *testing.T, d *Driver) []string {
	t.Helper()
	rows, err := d.Pool().Query(t.Context(), "SELECT queue || '/' || flow_key FROM leasehold_queue_key ORDER BY 1")
	if err != nil {
		t.Fatalf("list queue keys: %v", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatalf("scan: %v", err)
		}
		out = append(out, s)
	}
	return out
}

// TestQueueKeysFollowJobs: the keys the keyed claim walks are those of the
// jobs that are not completed, whatever inserts or updates them; the
// pruner deletes a key once its jobs have all completed, keeps one whose
// job failed (an operator may retry it), and a completed job made
// unfinished again adds its key back.
func TestQueueKeysFollowJobs(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	insertKeyed(t, d, "q", []string{"a", "b"}, 2) // COPY
	insertKeyed(t, d, "q", []string{""}, 1)       // no key: no row
	one := testJob("other")
	one.Key = "c"
	if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{one}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	if got, want := queueKeys(t, d), []string{"other/c", "q/a", "q/b"}; !slices.Equal(got, want) {
		t.Fatalf("keys after insert: %v, want %v", got, want)
	}
	pruner, ok := exec.(driver.QueueKeyPruner)
	if !ok {
		t.Fatal("the Postgres executor prunes no queue keys")
	}
	// prune goes over the table a key per step, as the pruner does in
	// larger ones.
	prune := func() int64 {
		t.Helper()
		var (
			n     int64
			after driver.QueueKey
		)
		for range 10 {
			res, err := pruner.QueueKeyPrune(ctx, &driver.QueueKeyPruneParams{After: after, Scan: 1})
			if err != nil {
				t.Fatalf("prune: %v", err)
			}
			n += res.Deleted
			if res.Next == nil {
				return n
			}
			after = *res.Next
		}
		t.Fatal("prune steps did not reach the end of three keys")
		return n
	}
	if n := prune(); n != 0 {
		t.Fatalf("pruned %d keys whose jobs wait", n)
	}
	// a's jobs complete, b's one completes and one is discarded, c's job
	// runs.
	for _, q := range []string{
		"UPDATE leasehold_job SET state = 'completed', finalized_at = now() WHERE flow_key = 'a'",
		"UPDATE leasehold_job SET state = 'completed', finalized_at = now() WHERE id = (SELECT min(id) FROM leasehold_job WHERE flow_key = 'b')",
		"UPDATE leasehold_job SET state = 'discarded', finalized_at = now() WHERE flow_key = 'b' AND state = 'available'",
		"UPDATE leasehold_job SET state = 'running', lease_owner = 'w', lease_until = now() + interval '1 hour' WHERE flow_key = 'c'",
	} {
		if _, err := d.Pool().Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if n := prune(); n != 1 {
		t.Fatalf("pruned %d keys, want 1 (a)", n)
	}
	if got, want := queueKeys(t, d), []string{"other/c", "q/b"}; !slices.Equal(got, want) {
		t.Fatalf("keys after prune: %v, want %v", got, want)
	}
	if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET state = 'available', finalized_at = NULL WHERE id = (SELECT min(id) FROM leasehold_job WHERE flow_key = 'a')"); err != nil {
		t.Fatalf("make a completed job available: %v", err)
	}
	if got, want := queueKeys(t, d), []string{"other/c", "q/a", "q/b"}; !slices.Equal(got, want) {
		t.Fatalf("keys after a completed job is available again: %v, want %v", got, want)
	}
	rows := claimKeyed(t, d, &driver.JobClaimKeyedParams{
		Claim:    &driver.JobClaimParams{Queue: "q", Max: 10, Owner: "w", DefaultLeaseTTL: time.Hour},
		KeyLimit: 1, Fair: true,
	})
	var got []string
	for _, r := range rows {
		got = append(got, r.Key)
	}
	slices.Sort(got)
	if want := []string{"", "a"}; !slices.Equal(got, want) {
		t.Fatalf("claimed keys %q, want %q", got, want)
	}
}

// TestQueueKeyPruneWaitsForInserts: a key whose jobs all completed is not
// deleted while a transaction that inserts a job with it is open (its
// insert found the key there, so adds nothing): the prune waits for it and
// then sees its job, or gives up at its lock timeout and deletes nothing.
// Without the lock, the prune's read would not see the uncommitted job and
// the key would go, leaving the job where no keyed claim walks.
func TestQueueKeyPruneWaitsForInserts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	insertKeyed(t, d, "q", []string{"k", "gone"}, 1)
	if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET state = 'completed', finalized_at = now()"); err != nil {
		t.Fatalf("complete: %v", err)
	}
	pruner := d.GetExecutor().(driver.QueueKeyPruner)
	for _, commitAfter := range []time.Duration{0, 20 * time.Millisecond} {
		tx, err := d.Pool().Begin(ctx)
		if err != nil {
			t.Fatalf("begin: %v", err)
		}
		p := testJob("q")
		p.Key = "k"
		if _, err := d.UnwrapExecutor(tx).JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p}}); err != nil {
			t.Fatalf("insert in tx: %v", err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			if commitAfter > 0 {
				time.Sleep(commitAfter)
				if err := tx.Commit(ctx); err != nil {
					t.Errorf("commit: %v", err)
				}
			}
		}()
		if _, err := pruner.QueueKeyPrune(ctx, &driver.QueueKeyPruneParams{}); err != nil {
			t.Fatalf("prune: %v", err)
		}
		<-done
		if commitAfter == 0 {
			if err := tx.Commit(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
		}
		if got := queueKeys(t, d); !slices.Contains(got, "q/k") {
			t.Fatalf("commit after %s: key k pruned while a job of it was being inserted: %v", commitAfter, got)
		}
		if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET state = 'completed', finalized_at = now()"); err != nil {
			t.Fatalf("complete: %v", err)
		}
	}
	if _, err := pruner.QueueKeyPrune(ctx, &driver.QueueKeyPruneParams{}); err != nil {
		t.Fatalf("prune: %v", err)
	}
	if got := queueKeys(t, d); len(got) != 0 {
		t.Fatalf("keys left once every job completed: %v", got)
	}
}

// TestKeyedClaimLockedHoldsKeyLimit: whole limited claims in one round
// trip each (JobClaimKeyedLocked), many at once and of two kinds, never
// lease two jobs of one key at KeyLimit 1, and together take one job of
// every key: each claim's counts see the claims committed before it got
// the lock. It fails without the lock.
func TestKeyedClaimLockedHoldsKeyLimit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	insertKeyed(t, d, "q", keys, 10)
	// Half the jobs of every key are of another kind, and half the claims
	// take only that kind: two claims that count a key free at once pick
	// different jobs of it, which only the lock keeps apart.
	if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET kind = 'other' WHERE id % 2 = 0"); err != nil {
		t.Fatalf("set kinds: %v", err)
	}
	lk := d.GetExecutor().(driver.LockedKeyedClaimer)
	locks := &driver.LimitLockParams{Keys: []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: "q"}}}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
	)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				rows, err := lk.JobClaimKeyedLocked(ctx, locks, &driver.JobClaimKeyedParams{
					Claim: &driver.JobClaimParams{Queue: "q", Max: 3, Owner: fmt.Sprintf("w%d", g), DefaultLeaseTTL: time.Hour,
						Kinds: []string{[]string{"test", "other"}[g%2]}},
					KeyLimit: 1, Fair: true,
				})
				if err != nil {
					t.Errorf("locked claim: %v", err)
					return
				}
				mu.Lock()
				for _, r := range rows {
					claimed[r.Key]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, k := range keys {
		if claimed[k] != 1 {
			t.Errorf("key %s: %d jobs leased at KeyLimit 1, want 1 (all: %v)", k, claimed[k], claimed)
		}
	}
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := d.UnwrapExecutor(tx).(driver.LockedKeyedClaimer).JobClaimKeyedLocked(ctx, locks, &driver.JobClaimKeyedParams{
		Claim: &driver.JobClaimParams{Queue: "q", Max: 1, Owner: "w", DefaultLeaseTTL: time.Hour}, KeyLimit: 1,
	}); err == nil {
		t.Error("JobClaimKeyedLocked inside a transaction: no error")
	}
}

// keyedArgs are the arguments of TestClientPrunesQueueKeys's jobs.
type keyedArgs struct{}

func (keyedArgs) Kind() string { return "keyed_prune" }

// TestClientPrunesQueueKeys: a client that holds the maintenance lease
// deletes the keys of jobs it completed within a few seconds (a key step
// every 2 s), not at the next full prune round (a minute), which ran at its
// start before these jobs existed.
func TestClientPrunesQueueKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[keyedArgs](func(ctx context.Context, j *leasehold.Job[keyedArgs]) error { return nil }))
	c, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: w, PollInterval: 100 * time.Millisecond,
		Queues: map[string]leasehold.QueueConfig{"keyed": {MaxWorkers: 10, KeyLimit: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) }) //nolint:errcheck
	// The first full round runs at start, before these jobs exist.
	time.Sleep(200 * time.Millisecond)
	var ids []int64
	for i := range 20 {
		res, err := c.Insert(ctx, keyedArgs{}, &leasehold.InsertOpts{Queue: "keyed", Key: fmt.Sprintf("k%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, id := range ids {
		for {
			j, err := c.JobGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == leasetype.JobStateCompleted {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %d is %s after 15 s", id, j.State)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for len(queueKeys(t, d)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("keys of completed jobs left after 15 s: %v", queueKeys(t, d))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
