package postgres

import (
	"context"
	"crypto/rand"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/migrate"
)

// trailCall is one trailing notification a noticeLimiter asked for.
type trailCall struct {
	queue   string
	tracker driver.SenderTracker
}

// newTestLimiter returns a limiter of window whose trailing notifications
// are reported on the returned channel.
func newTestLimiter(window time.Duration) (*noticeLimiter, <-chan trailCall) {
	calls := make(chan trailCall, 16)
	return newNoticeLimiter(window, func(_ context.Context, q string, tr driver.SenderTracker) {
		calls <- trailCall{q, tr}
	}), calls
}

func wantTrail(t *testing.T, calls <-chan trailCall, queue string, tracker driver.SenderTracker) {
	t.Helper()
	select {
	case c := <-calls:
		if c.queue != queue || c.tracker != tracker {
			t.Fatalf("trailing notification of %q told %v, want %q told %v", c.queue, c.tracker, queue, tracker)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no trailing notification of %q", queue)
	}
}

func wantNoTrail(t *testing.T, calls <-chan trailCall, within time.Duration) {
	t.Helper()
	select {
	case c := <-calls:
		t.Fatalf("unexpected trailing notification %+v", c)
	case <-time.After(within):
	}
}

// TestNoticeLimiter checks the limiter's decisions: the first insert of a
// window notifies, later ones are held back and paid by one trailing
// notification, told to a tracker only when it made every held-back insert;
// a notification that did not go out gives its debt back.
func TestNoticeLimiter(t *testing.T) {
	t.Parallel()
	const window = 250 * time.Millisecond
	a, b := newRecordingTracker(), newRecordingTracker()

	t.Run("HeldBackPaidByTrailing", func(t *testing.T) {
		t.Parallel()
		l, calls := newTestLimiter(window)
		start := time.Now()
		first := l.allow("q", a)
		if !first.notify || !first.tracked {
			t.Fatalf("first insert: notify %v tracked %v, want both", first.notify, first.tracked)
		}
		first.done(true, false)
		for range 3 {
			tk := l.allow("q", a)
			if tk.notify && time.Since(start) < window {
				t.Fatal("an insert inside the window notifies")
			}
			tk.done(true, false)
		}
		if other := l.allow("other", a); !other.notify {
			t.Fatal("another queue's first insert is held back")
		}
		wantTrail(t, calls, "q", a)
		wantNoTrail(t, calls, 2*window)
	})

	t.Run("UncommittedOwesNothing", func(t *testing.T) {
		t.Parallel()
		l, calls := newTestLimiter(window)
		l.allow("q", a).done(true, false)
		l.allow("q", a).done(false, false) // held back, inserted no available job
		wantNoTrail(t, calls, 3*window)
	})

	t.Run("UncertainOwes", func(t *testing.T) {
		t.Parallel()
		l, calls := newTestLimiter(window)
		l.allow("q", a).done(true, false)
		l.allow("q", a).done(false, true) // held back; its outcome unknown
		wantTrail(t, calls, "q", a)
	})

	t.Run("MixedTrackersTellNoOne", func(t *testing.T) {
		t.Parallel()
		l, calls := newTestLimiter(window)
		l.allow("q", a).done(true, false)
		l.allow("q", a).done(true, false)
		l.allow("q", b).done(true, false)
		wantTrail(t, calls, "q", nil)

		l.allow("q", a).done(true, false) // inside the trailing notification's window
		l.allow("q", nil).done(true, false)
		wantTrail(t, calls, "q", nil)
	})

	// The next two cases end the window by moving the queue's last
	// notification back instead of sleeping through it: with a window of an
	// hour the trailing notification cannot race the next insert, as it did
	// under -race on a busy machine when these cases slept.
	t.Run("NextInsertCarriesTheDebt", func(t *testing.T) {
		t.Parallel()
		l, calls := newTestLimiter(time.Hour)
		l.allow("q", a).done(true, false)
		l.allow("q", b).done(true, false) // held back: a debt of b's
		endWindow(l, "q")
		next := l.allow("q", a)
		if !next.notify {
			t.Fatal("the first insert after the window is held back")
		}
		if next.tracked {
			t.Fatal("a notification carrying b's insert is told to a")
		}
		next.done(true, false)
		wantNoTrail(t, calls, 2*window)
	})

	t.Run("FailedNoticeGivesTheDebtBack", func(t *testing.T) {
		t.Parallel()
		l, calls := newTestLimiter(time.Hour)
		l.allow("q", a).done(true, false)
		l.allow("q", a).done(true, false) // held back
		endWindow(l, "q")
		next := l.allow("q", a)
		if !next.notify || !next.tracked {
			t.Fatalf("the first insert after the window: notify %v tracked %v, want both", next.notify, next.tracked)
		}
		next.done(false, false) // its statement failed
		wantTrail(t, calls, "q", a)
	})

	t.Run("NoWindowNotifiesAlways", func(t *testing.T) {
		t.Parallel()
		var l *noticeLimiter = newNoticeLimiter(-1, nil)
		for range 3 {
			tk := l.allow("q", a)
			if !tk.notify || !tk.tracked {
				t.Fatal("without a window an insert is held back")
			}
			tk.done(true, false)
		}
	})
}

// endWindow moves the last notification of queue on l back by l's window,
// as if the window had passed.
func endWindow(l *noticeLimiter, queue string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[queue]
	q.last = q.last.Add(-l.window)
}

// recordingTracker is a driver.SenderTracker that counts Sending minus
// Unsent per sender and queue.
type recordingTracker struct {
	mu      sync.Mutex
	balance map[InsertNoticeKey]int
}

// InsertNoticeKey is a sender and queue.
type InsertNoticeKey struct {
	Sender int64
	Queue  string
}

func newRecordingTracker() *recordingTracker {
	return &recordingTracker{balance: map[InsertNoticeKey]int{}}
}

func (r *recordingTracker) Sending(sender int64, queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.balance[InsertNoticeKey{sender, queue}]++
}

func (r *recordingTracker) Unsent(sender int64, queue string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.balance[InsertNoticeKey{sender, queue}]--
}

func (r *recordingTracker) sent() map[InsertNoticeKey]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[InsertNoticeKey]int{}
	for k, v := range r.balance {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// listenNotices listens on d until the test ends and returns the channel of
// the notices of queue.
func listenNotices(t *testing.T, d *Driver, queue string) <-chan driver.InsertNotice {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan driver.InsertNotice, 1000)
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- d.ListenInserts(ctx, func() { close(ready) }, func(n driver.InsertNotice) {
			if n.Queue == queue {
				got <- n
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ListenInserts: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ListenInserts returned before listening: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("ListenInserts never became ready")
	}
	return got
}

// collectNotices returns the notices that arrive on got until quiet passes
// without one.
func collectNotices(got <-chan driver.InsertNotice, quiet time.Duration) []driver.InsertNotice {
	var out []driver.InsertNotice
	for {
		select {
		case n := <-got:
			out = append(out, n)
		case <-time.After(quiet):
			return out
		}
	}
}

// windowedDriver returns a driver on a fresh, migrated schema with the
// given notification window.
func windowedDriver(t *testing.T, window time.Duration) *Driver {
	t.Helper()
	d, err := NewWithOptions(newSchemaPool(t), &Options{NotifyWindow: window})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.New(d).Up(t.Context()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return d
}

// TestNotifyWindowCoalesces: inserts of one queue inside one window send at
// most two notifications, the first insert's and one trailing notification
// after the last, whatever way they insert (alone, in a batch, by COPY);
// the tracker is told of exactly the notifications that went out.
func TestNotifyWindowCoalesces(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	d := windowedDriver(t, window)
	queue := "coalesced-" + rand.Text()
	got := listenNotices(t, d, queue)
	exec := d.GetExecutor()
	tr := newRecordingTracker()
	ctx := t.Context()

	start := time.Now()
	const alone = 20
	for range alone {
		if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob(queue)}, SenderTracker: tr}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob(queue), testJob(queue)}, SenderTracker: tr}); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{testJob(queue)}, SenderTracker: tr}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= window {
		t.Skipf("the inserts took %s, more than the window", took)
	}
	notices := collectNotices(got, window+time.Second)
	if len(notices) != 2 {
		t.Fatalf("%d inserts inside one window sent %d notifications, want 2 (the first insert's and a trailing one)", alone+2, len(notices))
	}
	heard := map[InsertNoticeKey]int{}
	for _, n := range notices {
		heard[InsertNoticeKey{n.Sender, n.Queue}]++
	}
	if sent := tr.sent(); !maps.Equal(sent, heard) {
		t.Fatalf("tracker told of %v, notifications heard %v", sent, heard)
	}
}

// TestNotifyWindowKeepsCallersTxNotice: an insert in a caller's transaction
// inside a window keeps its own notification, which comes with its commit,
// even when the commit comes after the window: a notification from outside
// the transaction would announce a job not yet visible.
func TestNotifyWindowKeepsCallersTxNotice(t *testing.T) {
	t.Parallel()
	const window = 300 * time.Millisecond
	d := windowedDriver(t, window)
	queue := "tx-windowed-" + rand.Text()
	got := listenNotices(t, d, queue)
	ctx := t.Context()

	if _, err := d.GetExecutor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob(queue)}}); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // a no-op after Commit
	if _, err := d.UnwrapExecutor(tx).JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob(queue)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(collectNotices(got, 2*window)); n != 1 {
		t.Fatalf("%d notifications before the transaction committed, want 1 (the first insert's)", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(collectNotices(got, 2*window)); n != 1 {
		t.Fatalf("%d notifications after the commit, want 1", n)
	}
}

type windowArgs struct{}

func (windowArgs) Kind() string { return "window" }

// TestNotifyWindowHeldBackJobStartsPromptly: a job whose insert is held back
// by the window starts on another client well before that client's poll
// interval: the trailing notification wakes it.
func TestNotifyWindowHeldBackJobStartsPromptly(t *testing.T) {
	t.Parallel()
	const window = time.Second
	d := windowedDriver(t, window)
	queue := "prompt-" + rand.Text()
	ctx := t.Context()

	started := make(chan int64, 10)
	w := leasehold.NewWorkers()
	leasehold.AddWorker(w, leasehold.WorkFunc[windowArgs](func(ctx context.Context, j *leasehold.Job[windowArgs]) error {
		started <- j.ID
		return nil
	}))
	worker, err := leasehold.NewClient(d, &leasehold.Config{
		Workers: w, PollInterval: 10 * time.Second,
		Queues: map[string]leasehold.QueueConfig{queue: {MaxWorkers: 10}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := worker.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { worker.Stop(context.Background()) }) //nolint:errcheck
	inserter, err := leasehold.NewClient(d, &leasehold.Config{})
	if err != nil {
		t.Fatal(err)
	}
	waitStarted := func(id int64, within time.Duration) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case got := <-started:
				if got == id {
					return
				}
			case <-deadline:
				t.Fatalf("job %d did not start within %s (poll interval 10s)", id, within)
			}
		}
	}
	// The worker hears the listener's first notification once it is
	// listening: insert until one wakes it.
	// Each insert of the loop comes after the window of the one before, so
	// it notifies.
	var notified time.Time
	for woken := false; !woken; {
		notified = time.Now()
		if _, err := inserter.Insert(ctx, windowArgs{}, &leasehold.InsertOpts{Queue: queue}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
			woken = true
		case <-time.After(2 * window):
		}
	}
	// The next insert comes inside the window of the notification that
	// woke the worker, after the worker's claim: it is held back.
	res, err := inserter.Insert(ctx, windowArgs{}, &leasehold.InsertOpts{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(notified) >= window {
		t.Skip("the insert came after the window")
	}
	waitStarted(res.Job.ID, window+2*time.Second)
}
