package drivertest

import (
	"context"
	"crypto/rand"
	"maps"
	"sync"
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
	listen := func(t *testing.T, d driver.Driver[TTx]) (<-chan driver.InsertNotice, func()) {
		t.Helper()
		n, ok := driver.NotifierOf(d)
		if !ok {
			t.Skipf("driver %s does not implement driver.Notifier", d.Name())
		}
		ctx, cancel := context.WithCancel(t.Context())
		queues := make(chan driver.InsertNotice, 100)
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- n.ListenInserts(ctx, func() { close(ready) }, func(n driver.InsertNotice) {
				select {
				case queues <- n:
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
	expect := func(t *testing.T, queues <-chan driver.InsertNotice, want string) driver.InsertNotice {
		t.Helper()
		timeout := time.After(waitLimit)
		for {
			select {
			case n := <-queues:
				if n.Queue == want {
					return n
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

	// A notice names the session that sent it, as the driver told the
	// client's SenderTracker before the commit; what did not go out is
	// withdrawn. Queues are distinct per subtest, as the listener hears the
	// whole database.
	t.Run("NoticeNamesTheTrackedSender", func(t *testing.T) {
		t.Parallel()
		qOne := "tracked-one-" + rand.Text()
		d := b.New(t)
		queues, stop := listen(t, d)
		defer stop()
		tr := newRecordingTracker()
		ctx := t.Context()
		if _, err := d.GetExecutor().JobInsertMany(ctx, &driver.JobInsertManyParams{
			Jobs: []*driver.JobInsertParams{jobParams("k", qOne)}, SenderTracker: tr,
		}); err != nil {
			t.Fatal(err)
		}
		n := expect(t, queues, qOne)
		if n.Sender == 0 {
			t.Fatalf("notice %+v names no sender", n)
		}
		tr.wantBalance(t, map[trackedNotice]int{{n.Sender, qOne}: 1})
	})

	// Inserts in quick succession, faster than a driver that reads its
	// notices every few milliseconds reads them, each send a notice naming
	// their sender: a client recognises every one of its own.
	t.Run("EveryInsertOfABurstNamesItsSender", func(t *testing.T) {
		t.Parallel()
		qBurst := "tracked-burst-" + rand.Text()
		d := b.New(t)
		queues, stop := listen(t, d)
		defer stop()
		tr := newRecordingTracker()
		ctx := t.Context()
		const inserts = 5
		for range inserts {
			if _, err := d.GetExecutor().JobInsertMany(ctx, &driver.JobInsertManyParams{
				Jobs: []*driver.JobInsertParams{jobParams("k", qBurst)}, SenderTracker: tr,
			}); err != nil {
				t.Fatal(err)
			}
		}
		// A driver may coalesce a burst's notifications (postgres:
		// Options.NotifyWindow) but must then tell the tracker of only
		// those that went out: read until the notices stop, and every one
		// heard must name a sender the tracker was told of, no more.
		heard := map[trackedNotice]int{}
		n := expect(t, queues, qBurst)
		heard[trackedNotice{n.Sender, qBurst}]++
		for quiet := false; !quiet; {
			select {
			case n := <-queues:
				if n.Queue == qBurst {
					heard[trackedNotice{n.Sender, qBurst}]++
				}
			case <-time.After(time.Second):
				quiet = true
			}
		}
		if got := sumCounts(heard); got > inserts {
			t.Fatalf("%d notifications for %d inserts", got, inserts)
		}
		tr.wantBalance(t, heard)
	})

	t.Run("TrackerTakesBackWhatWasNotSent", func(t *testing.T) {
		t.Parallel()
		qLater := "tracked-later-" + rand.Text()
		qKeyed := "tracked-keyed-" + rand.Text()
		d := b.New(t)
		exec := d.GetExecutor()
		later := jobParams("k", qLater)
		later.ScheduledAt = ptr(time.Now().Add(time.Hour))
		keyed := jobParams("k", qKeyed)
		keyed.UniqueKey = qKeyed
		mustInsertOne(t, exec, keyed)

		tr := newRecordingTracker()
		ctx := t.Context()
		for _, p := range []*driver.JobInsertParams{later, keyed} {
			res, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p}, SenderTracker: tr})
			if err != nil {
				t.Fatal(err)
			}
			if p == keyed && !res[0].UniqueSkipped {
				t.Fatal("second insert of a unique key was not skipped")
			}
		}
		if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{later}, SenderTracker: tr}); err != nil {
			t.Fatal(err)
		}
		tr.wantBalance(t, map[trackedNotice]int{})
	})

	t.Run("TrackerNamesEveryQueueOfABatch", func(t *testing.T) {
		t.Parallel()
		qA := "tracked-a-" + rand.Text()
		qB := "tracked-b-" + rand.Text()
		qFast := "tracked-fast-" + rand.Text()
		d := b.New(t)
		queues, stop := listen(t, d)
		defer stop()
		exec := d.GetExecutor()
		tr := newRecordingTracker()
		ctx := t.Context()
		if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{
			Jobs:          []*driver.JobInsertParams{jobParams("k", qA), jobParams("k", qB), jobParams("k", qA)},
			SenderTracker: tr,
		}); err != nil {
			t.Fatal(err)
		}
		na := expect(t, queues, qA)
		nb := expect(t, queues, qB)
		if na.Sender == 0 || na.Sender != nb.Sender {
			t.Fatalf("notices %+v and %+v of one transaction name different senders", na, nb)
		}
		if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{jobParams("k", qFast)}, SenderTracker: tr}); err != nil {
			t.Fatal(err)
		}
		f := expect(t, queues, qFast)
		tr.wantBalance(t, map[trackedNotice]int{
			{na.Sender, qA}: 1, {na.Sender, qB}: 1, {f.Sender, qFast}: 1,
		})
	})

	t.Run("TrackerIgnoredInCallersTx", func(t *testing.T) {
		t.Parallel()
		qTx := "tracked-tx-" + rand.Text()
		d := b.New(t)
		queues, stop := listen(t, d)
		defer stop()
		tx, txExec := userTx(t, b, d)
		tr := newRecordingTracker()
		ctx := t.Context()
		if _, err := txExec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{jobParams("k", qTx)}, SenderTracker: tr}); err != nil {
			t.Fatal(err)
		}
		if err := b.CommitTx(t.Context(), tx); err != nil {
			t.Fatalf("CommitTx: %v", err)
		}
		expect(t, queues, qTx)
		if calls := tr.callCount(); calls != 0 {
			t.Fatalf("tracker got %d calls for an insert in the caller's transaction, want 0", calls)
		}
	})
}

// trackedNotice is a (sender, queue) a recordingTracker was told of.
type trackedNotice struct {
	sender int64
	queue  string
}

// recordingTracker is a driver.SenderTracker that counts Sending minus
// Unsent per (sender, queue).
type recordingTracker struct {
	mu      sync.Mutex
	balance map[trackedNotice]int
	calls   int
}

func newRecordingTracker() *recordingTracker {
	return &recordingTracker{balance: map[trackedNotice]int{}}
}

func (r *recordingTracker) Sending(sender int64, queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.balance[trackedNotice{sender, queue}]++
}

func (r *recordingTracker) Unsent(sender int64, queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	r.balance[trackedNotice{sender, queue}]--
}

func (r *recordingTracker) callCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// wantBalance checks that the notices said sent and not withdrawn are
// exactly want.
func (r *recordingTracker) wantBalance(t *testing.T, want map[trackedNotice]int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	got := map[trackedNotice]int{}
	for k, v := range r.balance {
		if v != 0 {
			got[k] = v
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("tracker: sent and not withdrawn %v, want %v", got, want)
	}
}

// sumCounts adds up the counts of m.
func sumCounts(m map[trackedNotice]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
