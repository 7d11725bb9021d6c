package drivertest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseKeys specifies the keyed claim (JobClaimKeyed) statement by
// statement, as a client runs it: in a transaction that first locks the
// limit rows. The walk of the keys (JobClaimKeyedParams.Fair) is pinned
// claim by claim: it starts after the last key the previous claim of the
// same statement visited, wraps round, stops after Max keys with a free
// slot and a claimable job (or Max + 256 keys), and ranks only those.
func exerciseKeys[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("RotatesAcrossClaims", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		insertKeyed(t, exec, "q", []string{"a", "b", "c", "d", "e"}, 3)
		insertKeyed(t, exec, "q", []string{""}, 1)
		// Fairness without a key limit, each claim's jobs completed before
		// the next, so no key has a job running when a claim ranks them:
		// ranking every key would give each claim the keys of the oldest
		// jobs until they drain.
		var got []string
		seen := map[string]int{}
		for range 8 {
			rows := claimKeyed(t, exec, &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", 2, longTTL), Fair: true})
			finishKeyed(t, exec, rows)
			keys := jobKeys(rows)
			if len(keys) != 2 {
				t.Fatalf("claims so far %v, then a claim of %v: want 2 jobs", got, keys)
			}
			if keys[0] == keys[1] && keys[0] != "" {
				t.Fatalf("claims so far %v, then a claim of two jobs of key %q while other keys wait", got, keys[0])
			}
			got = append(got, strings.Join(keys, "+"))
			for _, k := range keys {
				seen[k]++
			}
		}
		// 16 jobs claimed: every key's first job before any key's third,
		// and no key more than one job ahead of another.
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			if seen[k] != 3 {
				t.Errorf("key %s: %d jobs in the first 8 claims (%v), want 3 (round-robin)", k, seen[k], got)
			}
		}
		if seen[""] != 1 {
			t.Errorf("the job without a key: claimed %d times in %v, want once", seen[""], got)
		}
		first := map[string]bool{}
		for _, c := range got[:3] {
			for _, k := range strings.Split(c, "+") {
				first[k] = true
			}
		}
		if len(first) < 5 {
			t.Errorf("the first 3 claims %v took %d distinct groups, want at least 5: the walk does not move on", got[:3], len(first))
		}
	})

	t.Run("WrapsRoundToTheCursor", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		insertKeyed(t, exec, "q", []string{"a", "b", "c", "d", "e"}, 2)
		claim := func(max int) []*leasetype.JobRow {
			return claimKeyed(t, exec, &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", max, longTTL), KeyLimit: 1, Fair: true})
		}
		// KeyLimit 1 and nothing finished: each claim goes on from the
		// last key the one before visited; the third finds e, wraps round,
		// steps over a to d (full) and stops at d, the cursor.
		var running []*leasetype.JobRow
		for i, want := range []string{`["a" "b"]`, `["c" "d"]`, `["e"]`} {
			rows := claim(2)
			running = append(running, rows...)
			if got := keyList(rows); got != want {
				t.Fatalf("claim %d of 2 with KeyLimit 1: keys %s, want %s", i+1, got, want)
			}
		}
		if rows := claim(2); len(rows) != 0 {
			t.Fatalf("claim with every key at its limit: got %s, want none", describeJobs(rows))
		}
		finishKeyed(t, exec, running)
		// The last walk ended at d: the next starts at e and wraps to a.
		if got := keyList(claim(2)); got != `["a" "e"]` {
			t.Fatalf("claim of 2 after every key's first job finished: keys %s, want a and e (after the cursor, d)", got)
		}
	})

	t.Run("KeyLimitSkipsFullKeys", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		insertKeyed(t, exec, "q", []string{"a", "b", "c"}, 2)
		insertKeyed(t, exec, "q", []string{""}, 2)
		claim := func() []*leasetype.JobRow {
			return claimKeyed(t, exec, &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", 10, longTTL), KeyLimit: 1, Fair: true})
		}
		first := claim()
		if got := keyList(first); got != `["" "" "a" "b" "c"]` {
			t.Fatalf("claim of 10 with KeyLimit 1: keys %s, want one job of each key and both without a key", got)
		}
		if again := claim(); len(again) != 0 {
			t.Fatalf("claim with every key at its limit: got %s, want none", describeJobs(again))
		}
		var a *leasetype.JobRow
		for _, r := range first {
			if r.Key == "a" {
				a = r
			}
		}
		finishKeyed(t, exec, []*leasetype.JobRow{a})
		if got := keyList(claim()); got != `["a"]` {
			t.Fatalf("claim after key a's job finished: keys %s, want a", got)
		}
	})

	t.Run("FairnessReadsSeveralJobsOfAKey", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		// Key big's jobs in insert order with priorities 2, 1, 2, 1, 1, 2;
		// its claim order is the priority 1 jobs by ID, then the others.
		var big []*leasetype.JobRow
		for _, prio := range []int{2, 1, 2, 1, 1, 2} {
			p := jobParams("k", "q")
			p.Key, p.Priority = "big", prio
			big = append(big, mustInsertOne(t, exec, p))
		}
		insertKeyed(t, exec, "q", []string{"s1", "s2"}, 1)
		rows := claimKeyed(t, exec, &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", 5, longTTL), Fair: true})
		// Round 1: big's first, s1, s2; rounds 2 and 3: big's next two.
		var gotBig []int64
		small := 0
		for _, r := range rows {
			if r.Key == "big" {
				gotBig = append(gotBig, r.ID)
			} else {
				small++
			}
		}
		assertSameIDs(t, "key big's jobs in a fair claim of 5", gotBig, []int64{big[1].ID, big[3].ID, big[4].ID})
		if small != 2 {
			t.Errorf("fair claim of 5: %d jobs of s1 and s2, want both (%s)", small, describeJobs(rows))
		}
	})

	t.Run("FreeKeyBehindFullKeys", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		keys := make([]string, 300)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%03d", i)
		}
		insertKeyed(t, exec, "q", keys, 1)
		if got := mustClaim(t, exec, claimParams("q", "w", 300, longTTL)); len(got) != 300 {
			t.Fatalf("plain claim of 300: %d jobs", len(got))
		}
		insertKeyed(t, exec, "q", keys, 1)
		free := insertKeyed(t, exec, "q", []string{"zz"}, 1)[0]
		// 300 keys at their limit before the free one: a claim may walk
		// only Max + 256 of them, but the next goes on from there.
		var claimed []*leasetype.JobRow
		for range 2 {
			claimed = append(claimed, claimKeyed(t, exec, &driver.JobClaimKeyedParams{
				Claim: claimParams("q", "w", 1, longTTL), KeyLimit: 1, Fair: true,
			})...)
		}
		assertSameIDs(t, "two claims of 1 with KeyLimit 1 behind 300 full keys", jobIDs(claimed), []int64{free.ID})
	})

	t.Run("CursorPerClaimStatement", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		// Keys a to d, each a job of kind limited and one of kind other.
		for _, k := range []string{"a", "b", "c", "d"} {
			for _, kind := range []string{"limited", "other"} {
				p := jobParams(kind, "q")
				p.Key = k
				mustInsertOne(t, exec, p)
			}
		}
		// A client's claim of a kind with a key limit of its own and its
		// claim of the other kinds, in one transaction: the first walks a
		// and b; the second walks from its own cursor, so it starts at a,
		// not at c.
		tx := mustBegin(t, exec)
		if _, err := tx.LimitLock(t.Context(), &driver.LimitLockParams{Keys: []driver.LimitKey{
			{Scope: driver.LimitScopeQueue, Name: "q"}, {Scope: driver.LimitScopeKind, Name: "limited"},
		}}); err != nil {
			t.Fatalf("LimitLock: %v", err)
		}
		kindClaim := claimParams("q", "w", 2, longTTL)
		kindClaim.Kinds = []string{"limited"}
		got, err := tx.JobClaimKeyed(t.Context(), &driver.JobClaimKeyedParams{Claim: kindClaim, KindKeyLimit: 1, Fair: true})
		if err != nil {
			t.Fatalf("claim of kind limited: %v", err)
		}
		if keys := keyList(got); keys != `["a" "b"]` {
			t.Fatalf("claim of 2 of kind limited: keys %s, want a and b", keys)
		}
		rest := claimParams("q", "w", 1, longTTL)
		rest.ExcludeKinds = []string{"limited"}
		got, err = tx.JobClaimKeyed(t.Context(), &driver.JobClaimKeyedParams{Claim: rest, Fair: true})
		if err != nil {
			t.Fatalf("claim of the other kinds: %v", err)
		}
		mustCommit(t, tx)
		if len(got) != 1 || got[0].Key != "a" || got[0].Kind != "other" {
			t.Fatalf("claim of 1 of the other kinds after the kind's claim: got %s, want key a's job of kind other", describeJobs(got))
		}
	})

	t.Run("RateWindow", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		insertKeyed(t, exec, "q", []string{"x"}, 4)
		insertKeyed(t, exec, "q", []string{"y"}, 1)
		start := mustNow(t, exec).Add(-time.Second)
		window := &driver.KeyRateWindow{Scope: driver.LimitKey{Scope: driver.LimitScopeQueue, Name: "q"},
			Limit: 2, WindowStart: start, WindowEnd: start.Add(time.Hour)}
		claim := func() []*leasetype.JobRow {
			tx := mustBegin(t, exec)
			if _, err := tx.LimitLock(t.Context(), &driver.LimitLockParams{Keys: []driver.LimitKey{window.Scope}}); err != nil {
				t.Fatalf("LimitLock: %v", err)
			}
			rows, err := tx.JobClaimKeyed(t.Context(), &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", 10, longTTL), KeyRate: window, Fair: true})
			if err != nil {
				t.Fatalf("JobClaimKeyed: %v", err)
			}
			starts := map[string]int64{}
			for _, r := range rows {
				starts[r.Key]++
			}
			if err := tx.KeyWindowAdd(t.Context(), &driver.KeyWindowAddParams{Window: *window, Starts: starts}); err != nil {
				t.Fatalf("KeyWindowAdd: %v", err)
			}
			mustCommit(t, tx)
			return rows
		}
		if got := keyList(claim()); got != `["x" "x" "y"]` {
			t.Fatalf("claim of 10 at 2 starts per key and window: keys %s, want x twice and y", got)
		}
		if again := claim(); len(again) != 0 {
			t.Fatalf("claim in the same window after 2 starts of x: got %s, want none", describeJobs(again))
		}
	})

	t.Run("SequencesAndKindFilters", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		var seq []*leasetype.JobRow
		for range 3 {
			p := jobParams("k", "q")
			p.Key, p.Sequence = "a", "s"
			seq = append(seq, mustInsertOne(t, exec, p))
		}
		p := jobParams("skip", "q")
		p.Key = "b"
		mustInsertOne(t, exec, p)
		plain := insertKeyed(t, exec, "q", []string{"c"}, 1)[0]
		for _, tc := range []struct {
			name string
			p    *driver.JobClaimKeyedParams
		}{
			{"keyed", &driver.JobClaimKeyedParams{KeyLimit: 2, Fair: true}},
			{"sequences only", &driver.JobClaimKeyedParams{}},
		} {
			tx := mustBegin(t, exec)
			tc.p.Claim = claimParams("q", "w", 10, longTTL)
			tc.p.Claim.ExcludeKinds = []string{"skip"}
			got, err := tx.JobClaimKeyed(t.Context(), tc.p)
			if err != nil {
				t.Fatalf("%s: JobClaimKeyed: %v", tc.name, err)
			}
			mustRollback(t, tx)
			// a's sequence: its head only; b's job is of an excluded kind.
			assertSameIDs(t, tc.name+" claim of a sequence, an excluded kind and a plain job", jobIDs(got), []int64{seq[0].ID, plain.ID})
		}
	})

	t.Run("PausedQueue", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		insertKeyed(t, exec, "q", []string{"a", "b", ""}, 2)
		keyed := &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", 10, longTTL), KeyLimit: 1, Fair: true}
		plain := &driver.JobClaimKeyedParams{Claim: claimParams("q", "w", 1, longTTL)}
		if err := exec.QueueSetPaused(t.Context(), &driver.QueueSetPausedParams{Name: "q", Paused: true}); err != nil {
			t.Fatalf("pause: %v", err)
		}
		if rows := claimKeyed(t, exec, keyed); len(rows) != 0 {
			t.Fatalf("keyed claim of a paused queue took %d jobs", len(rows))
		}
		if rows := claimKeyed(t, exec, plain); len(rows) != 0 {
			t.Fatalf("claim without key limits of a paused queue took %d jobs", len(rows))
		}
		if err := exec.QueueSetPaused(t.Context(), &driver.QueueSetPausedParams{Name: "q", Paused: false}); err != nil {
			t.Fatalf("resume: %v", err)
		}
		// KeyLimit 1: one job of a and of b, and both jobs without a key.
		if rows := claimKeyed(t, exec, keyed); len(rows) != 4 {
			t.Fatalf("keyed claim of the resumed queue took %d jobs, want 4", len(rows))
		}
		if rows := claimKeyed(t, exec, plain); len(rows) != 1 {
			t.Fatalf("claim without key limits of the resumed queue took %d jobs, want 1", len(rows))
		}
	})
}

// insertKeyed inserts perKey jobs of kind k for each of keys, key by key
// (key "" inserts jobs without a key), and returns them in insert order.
func insertKeyed(t *testing.T, exec driver.Executor, queue string, keys []string, perKey int) []*leasetype.JobRow {
	t.Helper()
	var params []*driver.JobInsertParams
	for _, k := range keys {
		for range perKey {
			p := jobParams("k", queue)
			p.Key = k
			params = append(params, p)
		}
	}
	return mustInsert(t, exec, params...)
}

// claimKeyed runs one keyed claim as a client's limited claim does: in a
// transaction that first locks the queue's limit row (and the kind's, for
// a claim of one kind).
func claimKeyed(t *testing.T, exec driver.Executor, p *driver.JobClaimKeyedParams) []*leasetype.JobRow {
	t.Helper()
	tx := mustBegin(t, exec)
	keys := []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: p.Claim.Queue}}
	if len(p.Claim.Kinds) == 1 {
		keys = append(keys, driver.LimitKey{Scope: driver.LimitScopeKind, Name: p.Claim.Kinds[0]})
	}
	if _, err := tx.LimitLock(t.Context(), &driver.LimitLockParams{Keys: keys}); err != nil {
		t.Fatalf("LimitLock: %v", err)
	}
	rows, err := tx.JobClaimKeyed(t.Context(), p)
	if err != nil {
		t.Fatalf("JobClaimKeyed: %v", err)
	}
	mustCommit(t, tx)
	if len(rows) > p.Claim.Max {
		t.Fatalf("JobClaimKeyed: claimed %d jobs, Max is %d", len(rows), p.Claim.Max)
	}
	return rows
}

// finishKeyed completes claimed jobs.
func finishKeyed(t *testing.T, exec driver.Executor, rows []*leasetype.JobRow) {
	t.Helper()
	items := make([]*driver.JobFinish, len(rows))
	for i, r := range rows {
		items[i] = completeItem(r)
	}
	if ids := mustFinish(t, exec, "w", items...); len(ids) != len(rows) {
		t.Fatalf("JobFinish of %d jobs finished %d", len(rows), len(ids))
	}
}

// keyList returns the jobs' keys, sorted, quoted: ["" "a" "a"].
func keyList(rows []*leasetype.JobRow) string { return fmt.Sprintf("%q", jobKeys(rows)) }

// jobKeys returns the jobs' keys, sorted.
func jobKeys(rows []*leasetype.JobRow) []string {
	keys := make([]string, len(rows))
	for i, r := range rows {
		keys[i] = r.Key
	}
	slices.Sort(keys)
	return keys
}
