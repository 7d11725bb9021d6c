package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// exerciseQueue specifies queue control: a paused queue yields nothing to a
// claim until resumed; other queues are unaffected; the control rows list.
func exerciseQueue[TTx any](t *testing.T, b Backend[TTx]) {
	t.Run("PauseResume", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		exec := d.GetExecutor()
		ctx := context.Background()
		var params []*driver.JobInsertParams
		for _, q := range []string{"payments", "payments", "emails"} {
			params = append(params, &driver.JobInsertParams{Kind: "k", Queue: q, Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 3})
		}
		if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: params}); err != nil {
			t.Fatal(err)
		}
		claim := func(queue string) int {
			t.Helper()
			rows, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: queue, Max: 1, Owner: "w", DefaultLeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			return len(rows)
		}
		if err := exec.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "payments", Paused: true}); err != nil {
			t.Fatal(err)
		}
		// Pausing twice keeps the first pause time.
		first, err := exec.QueueList(ctx)
		if err != nil || len(first) != 1 || first[0].Name != "payments" || first[0].PausedAt == nil {
			t.Fatalf("QueueList after pause = %+v, %v", first, err)
		}
		if err := exec.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "payments", Paused: true}); err != nil {
			t.Fatal(err)
		}
		again, err := exec.QueueList(ctx)
		if err != nil || !again[0].PausedAt.Equal(*first[0].PausedAt) {
			t.Fatalf("second pause moved paused_at: %+v, %v", again, err)
		}
		if n := claim("payments"); n != 0 {
			t.Fatalf("claimed %d jobs from a paused queue", n)
		}
		if n := claim("emails"); n != 1 {
			t.Fatalf("claimed %d jobs from an active queue, want 1", n)
		}
		if err := exec.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "payments", Paused: false}); err != nil {
			t.Fatal(err)
		}
		if n := claim("payments"); n != 1 {
			t.Fatalf("claimed %d jobs after resume, want 1", n)
		}
		rows, err := exec.QueueList(ctx)
		if err != nil || len(rows) != 1 || rows[0].PausedAt != nil || rows[0].UpdatedAt.IsZero() {
			t.Fatalf("QueueList after resume = %+v, %v", rows, err)
		}
		// A queue that never had jobs can be paused ahead of time.
		if err := exec.QueueSetPaused(ctx, &driver.QueueSetPausedParams{Name: "later", Paused: true}); err != nil {
			t.Fatal(err)
		}
		if rows, _ := exec.QueueList(ctx); len(rows) != 2 || rows[0].Name != "later" {
			t.Fatalf("QueueList = %+v, want later and payments in name order", rows)
		}
	})
}
