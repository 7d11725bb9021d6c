package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exerciseClients specifies the client registry: ClientRegister,
// ClientList, ClientRemove, ClientPrune.
func exerciseClients[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	register := func(t *testing.T, exec driver.Executor, p *driver.ClientRegisterParams) {
		t.Helper()
		if err := exec.ClientRegister(t.Context(), p); err != nil {
			t.Fatalf("ClientRegister(%+v): %v", p, err)
		}
	}
	list := func(t *testing.T, exec driver.Executor, p *driver.ClientListParams) []*leasetype.ClientRow {
		t.Helper()
		rows, err := exec.ClientList(t.Context(), p)
		if err != nil {
			t.Fatalf("ClientList(%+v): %v", p, err)
		}
		return rows
	}
	owners := func(rows []*leasetype.ClientRow) []string {
		out := []string{}
		for _, r := range rows {
			out = append(out, r.Owner)
		}
		return out
	}

	t.Run("RegisterListRemove", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		if rows := list(t, exec, &driver.ClientListParams{}); len(rows) != 0 {
			t.Fatalf("empty registry lists %d rows", len(rows))
		}
		before := mustNow(t, exec)
		register(t, exec, &driver.ClientRegisterParams{Owner: "web-1:42:b", Host: "web-1", PID: 42, ID: "b", Version: "v1.2.3",
			Queues: []string{"mail", "payments"}, Running: 2, TTL: time.Hour})
		after := mustNow(t, exec)
		register(t, exec, &driver.ClientRegisterParams{Owner: "web-0:7:a", Host: "web-0", PID: 7, ID: "a", Queues: []string{"default"}, TTL: time.Hour})

		rows := list(t, exec, &driver.ClientListParams{})
		if !slices.Equal(owners(rows), []string{"web-0:7:a", "web-1:42:b"}) {
			t.Fatalf("owners = %v, want owner order", owners(rows))
		}
		got := rows[1]
		if got.Host != "web-1" || got.PID != 42 || got.ID != "b" || got.Version != "v1.2.3" || got.Running != 2 ||
			!slices.Equal(got.Queues, []string{"mail", "payments"}) || !got.Alive {
			t.Fatalf("row read back as %+v", got)
		}
		assertWithin(t, "StartedAt (database clock)", got.StartedAt, before, after)
		assertWithin(t, "SeenAt (database clock)", got.SeenAt, before, after)
		assertDuration(t, "ExpiresAt - SeenAt", got.ExpiresAt.Sub(got.SeenAt), time.Hour)

		// A beat updates the row and keeps StartedAt.
		waitPast(t, exec, after.Add(5*time.Millisecond))
		register(t, exec, &driver.ClientRegisterParams{Owner: "web-1:42:b", Host: "web-1", PID: 42, ID: "b", Version: "v1.2.3",
			Queues: []string{"payments"}, Running: 5, TTL: time.Minute})
		beat := list(t, exec, &driver.ClientListParams{})[1]
		if beat.Running != 5 || !slices.Equal(beat.Queues, []string{"payments"}) || !beat.StartedAt.Equal(got.StartedAt) || !beat.SeenAt.After(got.SeenAt) {
			t.Fatalf("after a beat: %+v; want running 5, queues [payments], StartedAt %s kept, SeenAt after %s", beat, got.StartedAt, got.SeenAt)
		}
		assertDuration(t, "ExpiresAt - SeenAt after the beat", beat.ExpiresAt.Sub(beat.SeenAt), time.Minute)

		if rows := list(t, exec, &driver.ClientListParams{Limit: 1}); !slices.Equal(owners(rows), []string{"web-0:7:a"}) {
			t.Fatalf("Limit 1 lists %v", owners(rows))
		}

		removed, err := exec.ClientRemove(t.Context(), &driver.ClientRemoveParams{Owner: "web-0:7:a"})
		if err != nil || !removed {
			t.Fatalf("ClientRemove = %v, %v; want true", removed, err)
		}
		removed, err = exec.ClientRemove(t.Context(), &driver.ClientRemoveParams{Owner: "web-0:7:a"})
		if err != nil || removed {
			t.Fatalf("second ClientRemove = %v, %v; want false", removed, err)
		}
		if rows := list(t, exec, &driver.ClientListParams{}); !slices.Equal(owners(rows), []string{"web-1:42:b"}) {
			t.Fatalf("after remove: %v", owners(rows))
		}
	})

	t.Run("ExpiredAndPruned", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		// Long enough that a loaded machine lists it before it expires.
		register(t, exec, &driver.ClientRegisterParams{Owner: "dead:1:x", TTL: time.Second})
		register(t, exec, &driver.ClientRegisterParams{Owner: "live:2:y", TTL: time.Hour})
		dead := list(t, exec, &driver.ClientListParams{})[0]
		if !dead.Alive {
			t.Fatalf("a row within its TTL is not alive: %+v", dead)
		}
		waitPast(t, exec, dead.ExpiresAt)
		rows := list(t, exec, &driver.ClientListParams{})
		if rows[0].Owner != "dead:1:x" || rows[0].Alive || !rows[1].Alive {
			t.Fatalf("after the TTL: %+v, %+v; want dead not alive, live alive", rows[0], rows[1])
		}
		if n, err := exec.ClientPrune(t.Context(), &driver.ClientPruneParams{OlderThan: time.Hour}); err != nil || n != 0 {
			t.Fatalf("ClientPrune(1h) = %d, %v; want 0: the row expired only just", n, err)
		}
		if n, err := exec.ClientPrune(t.Context(), &driver.ClientPruneParams{}); err != nil || n != 1 {
			t.Fatalf("ClientPrune(0) = %d, %v; want the expired row", n, err)
		}
		if rows := list(t, exec, &driver.ClientListParams{}); !slices.Equal(owners(rows), []string{"live:2:y"}) {
			t.Fatalf("after prune: %v, want the live row only", owners(rows))
		}
		// A beat of a pruned client brings it back (it was only partitioned).
		register(t, exec, &driver.ClientRegisterParams{Owner: "dead:1:x", TTL: time.Hour})
		if rows := list(t, exec, &driver.ClientListParams{}); len(rows) != 2 || !rows[0].Alive {
			t.Fatalf("after the pruned client beat again: %+v", rows)
		}
	})
}
