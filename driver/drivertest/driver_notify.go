package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// exerciseNotify specifies the optional Notifier capability. Drivers without
// it skip these tests.
func exerciseNotify[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	// listen starts ListenInserts and waits until it is ready. The returned
	// stop ends it and checks that it returned nil.
	listen := func(t *testing.T, d driver.Driver[TTx]) (<-chan string, func()) {
		t.Helper()
		n, ok := any(d).(driver.Notifier)
		if !ok {
			t.Skipf("driver %s does not implement driver.Notifier", d.Name())
		}
		ctx, cancel := context.WithCancel(t.Context())
		queues := make(chan string, 100)
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- n.ListenInserts(ctx, func() { close(ready) }, func(q string) {
				select {
				case queues <- q:
				default:
				}
			})
		}()
		select {
		case <-ready:
		case err := <-done:
			cancel()
			t.Fatalf("ListenInserts returned before ready: %v", err)
		case <-time.After(waitLimit):
			cancel()
			t.Fatalf("ListenInserts not ready within %s", waitLimit)
		}
		stop := func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("ListenInserts after cancel: %v, want nil", err)
				}
			case <-time.After(waitLimit):
				t.Errorf("ListenInserts did not return after cancel")
			}
		}
		return queues, stop
	}
	expect := func(t *testing.T, queues <-chan string, want string) {
		t.Helper()
		timeout := time.After(waitLimit)
		for {
			select {
			case q := <-queues:
				if q == want {
					return
				}
			case <-timeout:
				t.Fatalf("no notification for queue %q within %s", want, waitLimit)
			}
		}
	}

	t.Run("InsertNotifies", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		queues, stop := listen(t, d)
		defer stop()
		mustInsertOne(t, d.GetExecutor(), jobParams("k", "notified"))
		expect(t, queues, "notified")
	})

	t.Run("InsertInTxNotifiesAtCommit", func(t *testing.T) {
		t.Parallel()
		d := b.New(t)
		queues, stop := listen(t, d)
		defer stop()
		tx, txExec := userTx(t, b, d)
		mustInsertOne(t, txExec, jobParams("k", "tx-queue"))
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		expect(t, queues, "tx-queue")
	})
}
