package drivertest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// exerciseLeader specifies leader leases: LeaderAttempt acquires, renews or
// reports the holder, fenced by a token that grows with every new holder;
// LeaderResign ends a lease at once.
func exerciseLeader[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	t.Run("AcquireAndRenew", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		before := mustNow(t, exec)
		first := mustLeaderAttempt(t, exec, "maint", "a", 0, longTTL)
		after := mustNow(t, exec)
		if first.Name != "maint" || first.Owner != "a" || first.Token != 1 {
			t.Errorf("first acquire: %+v, want maint held by a with token 1", *first)
		}
		assertWithin(t, "AcquiredAt", first.AcquiredAt, before, after)
		assertDuration(t, "LeaseUntil - AcquiredAt", first.LeaseUntil.Sub(first.AcquiredAt), longTTL)

		waitPast(t, exec, first.AcquiredAt.Add(10*time.Millisecond))
		before = mustNow(t, exec)
		renewed := mustLeaderAttempt(t, exec, "maint", "a", 1, 2*longTTL)
		after = mustNow(t, exec)
		if renewed.Owner != "a" || renewed.Token != 1 || !renewed.AcquiredAt.Equal(first.AcquiredAt) {
			t.Errorf("renewal: owner %s token %d acquired %s, want a, 1 and the first acquisition's %s", renewed.Owner, renewed.Token, renewed.AcquiredAt, first.AcquiredAt)
		}
		assertWithin(t, "renewed LeaseUntil", renewed.LeaseUntil, before.Add(2*longTTL), after.Add(2*longTTL))

		// Leases are per name.
		other := mustLeaderAttempt(t, exec, "reaper", "b", 0, longTTL)
		if other.Name != "reaper" || other.Owner != "b" || other.Token != 1 {
			t.Errorf("acquire of another name: %+v, want reaper held by b with token 1", *other)
		}
	})

	t.Run("LiveLeaseNotTaken", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		held := mustLeaderAttempt(t, exec, "maint", "a", 0, longTTL)
		// Neither a newcomer nor one that guesses the token takes it.
		for _, token := range []int64{0, 1, 2} {
			got := mustLeaderAttempt(t, exec, "maint", "b", token, longTTL)
			assertLeader(t, fmt.Sprintf("attempt by b with token %d", token), got, held)
		}
		// The holder with another token (not its grant) does not renew either.
		got := mustLeaderAttempt(t, exec, "maint", "a", 7, 2*longTTL)
		assertLeader(t, "attempt by a with a token it was not granted", got, held)
		// A longer TTL than the grant's, so that the renewal's LeaseUntil is
		// later even within the clock's resolution (milliseconds on SQLite).
		if renewed := mustLeaderAttempt(t, exec, "maint", "a", 1, 2*longTTL); renewed.Owner != "a" || renewed.Token != 1 || !renewed.LeaseUntil.After(held.LeaseUntil) {
			t.Errorf("renewal by the holder: %+v, want a with token 1 and a later LeaseUntil than %s", *renewed, held.LeaseUntil)
		}
	})

	t.Run("TakeOverAfterExpiry", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustLeaderAttempt(t, exec, "maint", "a", 0, longTTL)
		// Renew with a short TTL, so the lease is certain to be live until here.
		short := mustLeaderAttempt(t, exec, "maint", "a", 1, shortTTL)
		if short.Owner != "a" || short.Token != 1 {
			t.Fatalf("renewal with a short TTL: %+v, want a with token 1", *short)
		}
		waitPast(t, exec, short.LeaseUntil)

		before := mustNow(t, exec)
		taken := mustLeaderAttempt(t, exec, "maint", "b", 0, longTTL)
		after := mustNow(t, exec)
		if taken.Owner != "b" || taken.Token != 2 {
			t.Fatalf("take-over after expiry: %+v, want b with token 2", *taken)
		}
		assertWithin(t, "AcquiredAt of the new holder", taken.AcquiredAt, before, after)
		assertDuration(t, "LeaseUntil - AcquiredAt", taken.LeaseUntil.Sub(taken.AcquiredAt), longTTL)

		// The old holder wakes up: it can neither renew nor resign.
		got := mustLeaderAttempt(t, exec, "maint", "a", 1, longTTL)
		assertLeader(t, "renewal by the old holder", got, taken)
		mustLeaderResign(t, exec, "maint", "a", 1)
		got = mustLeaderAttempt(t, exec, "maint", "c", 0, longTTL)
		assertLeader(t, "attempt by c after the old holder's resign", got, taken)
	})

	t.Run("ExpiredHolderRetakesWithNewToken", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustLeaderAttempt(t, exec, "maint", "a", 0, longTTL)
		short := mustLeaderAttempt(t, exec, "maint", "a", 1, shortTTL)
		waitPast(t, exec, short.LeaseUntil)
		// An expired lease is taken anew even by its last holder: a new grant.
		again := mustLeaderAttempt(t, exec, "maint", "a", 1, longTTL)
		if again.Owner != "a" || again.Token != 2 || !again.AcquiredAt.After(short.AcquiredAt) {
			t.Fatalf("re-acquire after expiry: %+v, want a with token 2 and a new AcquiredAt", *again)
		}
		// A process still acting on the first grant does not renew the second.
		got := mustLeaderAttempt(t, exec, "maint", "a", 1, 2*longTTL)
		assertLeader(t, "renewal with the first grant's token", got, again)
	})

	t.Run("Resign", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		held := mustLeaderAttempt(t, exec, "maint", "a", 0, longTTL)
		// A resign with the wrong token or owner does nothing.
		mustLeaderResign(t, exec, "maint", "a", 2)
		mustLeaderResign(t, exec, "maint", "b", 1)
		mustLeaderResign(t, exec, "other", "a", 1)
		got := mustLeaderAttempt(t, exec, "maint", "b", 0, longTTL)
		assertLeader(t, "attempt by b after wrong resigns", got, held)

		mustLeaderResign(t, exec, "maint", "a", 1)
		before := mustNow(t, exec)
		taken := mustLeaderAttempt(t, exec, "maint", "b", 0, longTTL)
		after := mustNow(t, exec)
		if taken.Owner != "b" || taken.Token != 2 {
			t.Fatalf("attempt by b right after a resigned: %+v, want b with token 2", *taken)
		}
		assertWithin(t, "AcquiredAt", taken.AcquiredAt, before, after)
	})

	t.Run("ConcurrentAcquireOneHolder", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		const n = 8
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			rows  = make([]*driver.LeaderRow, n)
			errs  = make([]error, n)
		)
		for i := range n {
			wg.Go(func() {
				<-start
				rows[i], errs[i] = exec.LeaderAttempt(t.Context(), &driver.LeaderParams{Name: "maint", Owner: fmt.Sprintf("o%d", i), TTL: longTTL})
			})
		}
		close(start)
		wg.Wait()
		winners := 0
		var holder string
		for i := range n {
			if errs[i] != nil {
				t.Errorf("owner o%d: LeaderAttempt: %v", i, errs[i])
				continue
			}
			r := rows[i]
			if r == nil {
				t.Errorf("owner o%d: LeaderAttempt returned no row", i)
				continue
			}
			if r.Token != 1 {
				t.Errorf("owner o%d saw token %d, want 1 (one grant only)", i, r.Token)
			}
			if holder == "" {
				holder = r.Owner
			} else if r.Owner != holder {
				t.Errorf("owner o%d saw holder %s, another saw %s", i, r.Owner, holder)
			}
			if r.Owner == fmt.Sprintf("o%d", i) {
				winners++
			}
		}
		if winners != 1 {
			t.Errorf("owners that saw themselves holding the lease = %d, want 1", winners)
		}
	})
}

func mustLeaderAttempt(t *testing.T, exec driver.Executor, name, owner string, token int64, ttl time.Duration) *driver.LeaderRow {
	t.Helper()
	row, err := exec.LeaderAttempt(t.Context(), &driver.LeaderParams{Name: name, Owner: owner, Token: token, TTL: ttl})
	if err != nil {
		t.Fatalf("LeaderAttempt(%s, %s, token %d): %v", name, owner, token, err)
	}
	if row == nil || row.Name != name {
		t.Fatalf("LeaderAttempt(%s, %s, token %d): returned %+v", name, owner, token, row)
	}
	return row
}

func mustLeaderResign(t *testing.T, exec driver.Executor, name, owner string, token int64) {
	t.Helper()
	if err := exec.LeaderResign(t.Context(), &driver.LeaderParams{Name: name, Owner: owner, Token: token}); err != nil {
		t.Fatalf("LeaderResign(%s, %s, token %d): %v", name, owner, token, err)
	}
}

// assertLeader checks that an attempt changed nothing: the lease is as want.
func assertLeader(t *testing.T, what string, got, want *driver.LeaderRow) {
	t.Helper()
	if got.Owner != want.Owner || got.Token != want.Token || !got.LeaseUntil.Equal(want.LeaseUntil) || !got.AcquiredAt.Equal(want.AcquiredAt) {
		t.Errorf("%s: got holder %s token %d until %s acquired %s; want unchanged %s token %d until %s acquired %s",
			what, got.Owner, got.Token, got.LeaseUntil, got.AcquiredAt, want.Owner, want.Token, want.LeaseUntil, want.AcquiredAt)
	}
}
