package leasehold

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// newEventClient returns an insert-only client on SQLite, whose event hub
// the tests drive directly.
func newEventClient(t *testing.T) *Client[*sql.Tx] {
	t.Helper()
	c, err := NewClient(newTestSQLite(t), &Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recvEvent receives one event or fails the test after timeout.
func recvEvent(t *testing.T, ch <-chan *Event, timeout time.Duration) *Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return e
	case <-time.After(timeout):
		t.Fatalf("no event within %s", timeout)
		return nil
	}
}

// pending drains what is buffered in ch without waiting.
func pending(ch <-chan *Event) []*Event {
	var out []*Event
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, e)
		default:
			return out
		}
	}
}

func kindsOf(events []*Event) []EventKind {
	var out []EventKind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

func TestSubscribeFansOutByKind(t *testing.T) {
	t.Parallel()
	c := newEventClient(t)
	completed, stopA := mustSubscribe(t, c, EventKindJobCompleted)
	defer stopA()
	both, stopB := mustSubscribe(t, c, EventKindJobCompleted, EventKindJobFailed)
	defer stopB()
	expired, stopC := mustSubscribe(t, c, EventKindJobExpired)
	defer stopC()

	row := &leasetype.JobRow{ID: 7, Kind: "k", State: leasetype.JobStateRunning, Attempt: 2, Errors: 1, MaxAttempts: 5, LastError: "old"}
	retryAt := time.Now().Add(time.Minute)
	c.core.events.outcome(row, &driver.JobFinish{State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomeFailed, Error: "boom", CountError: true, ScheduledAt: &retryAt})
	c.core.events.outcome(row, &driver.JobFinish{State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted})
	c.core.events.expired([]*leasetype.JobRow{{ID: 8, State: leasetype.JobStateAvailable, Expiries: 1}})

	if got := kindsOf(pending(completed)); len(got) != 1 || got[0] != EventKindJobCompleted {
		t.Fatalf("completed-only subscription got %v, want [job_completed]", got)
	}
	got := pending(both)
	if k := kindsOf(got); len(k) != 2 || k[0] != EventKindJobFailed || k[1] != EventKindJobCompleted {
		t.Fatalf("completed+failed subscription got %v, want [job_failed job_completed]", k)
	}
	failed := got[0].Job
	if failed.ID != 7 || failed.State != leasetype.JobStateRetryable || failed.Errors != 2 || failed.LastError != "boom" ||
		!failed.ScheduledAt.Equal(retryAt) || failed.Attempt != 2 || got[0].Err != nil || got[0].Time.IsZero() {
		t.Fatalf("failed event = %+v job %+v; want job 7 retryable, errors 2, last error boom, scheduled at the retry, attempt 2", got[0], failed)
	}
	if done := got[1].Job; done.State != leasetype.JobStateCompleted || done.Errors != 1 || done.LastError != "old" {
		t.Fatalf("completed event job %+v; want completed with errors and last error unchanged", done)
	}
	if row.State != leasetype.JobStateRunning || row.Errors != 1 {
		t.Fatalf("the claimed row was changed: %+v", row)
	}
	if e := pending(expired); len(e) != 1 || e[0].Kind != EventKindJobExpired || e[0].Job.ID != 8 {
		t.Fatalf("expired subscription got %v, want one job_expired of job 8", kindsOf(e))
	}
}

func TestSubscribeOutcomeKinds(t *testing.T) {
	t.Parallel()
	tests := func() []struct {
		item driver.JobFinish
		want EventKind
	} {
		return []struct {
			item driver.JobFinish
			want EventKind
		}{
			{driver.JobFinish{State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}, EventKindJobCompleted},
			{driver.JobFinish{State: leasetype.JobStateRetryable, Outcome: leasetype.OutcomePanicked}, EventKindJobFailed},
			{driver.JobFinish{State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed}, EventKindJobDiscarded},
			{driver.JobFinish{State: leasetype.JobStateCancelled, Outcome: leasetype.OutcomeCancelled}, EventKindJobCancelled},
			{driver.JobFinish{State: leasetype.JobStateScheduled, Outcome: leasetype.OutcomeSnoozed}, EventKindJobSnoozed},
			{driver.JobFinish{State: leasetype.JobStateAvailable, Outcome: leasetype.OutcomeReleased}, ""},
		}
	}
	for _, tc := range tests() {
		if got := outcomeKind(&tc.item); got != tc.want {
			t.Errorf("outcomeKind(%s/%s) = %q, want %q", tc.item.State, tc.item.Outcome, got, tc.want)
		}
	}
}

func TestSubscribeFullChannelDropsAndCounts(t *testing.T) {
	t.Parallel()
	c := newEventClient(t)
	small, stopSmall, err := c.SubscribeConfig(&SubscribeConfig{Kinds: []EventKind{EventKindJobCompleted}, ChanSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer stopSmall()
	large, stopLarge := mustSubscribe(t, c, EventKindJobCompleted)
	defer stopLarge()

	// Nobody receives: were a send to block, this would never return.
	row := &leasetype.JobRow{ID: 1}
	for range 5 {
		c.core.events.outcome(row, &driver.JobFinish{State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted})
	}
	if n := len(pending(small)); n != 2 {
		t.Fatalf("full subscription kept %d events, want its capacity 2", n)
	}
	if n := len(pending(large)); n != 5 {
		t.Fatalf("roomy subscription got %d events, want all 5", n)
	}
	if got := c.Stats().EventsDropped; got != 3 {
		t.Fatalf("Stats.EventsDropped = %d, want 3", got)
	}
}

func TestSubscribeCancelClosesChannel(t *testing.T) {
	t.Parallel()
	c := newEventClient(t)
	ch, cancel := mustSubscribe(t, c, EventKindLeaseLost)
	other, stopOther := mustSubscribe(t, c, EventKindJobCompleted)
	defer stopOther()
	cancel()
	cancel() // a second call is a no-op
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after cancel")
	}
	if c.core.events.wants(EventKindLeaseLost) || !c.core.events.wants(EventKindJobCompleted) {
		t.Fatal("kinds wanted not updated after cancel")
	}
	// Sending to a cancelled kind neither panics nor counts a drop.
	c.core.events.leaseLost(&leasetype.JobRow{ID: 1}, &LeaseLostError{JobID: 1})
	c.core.events.outcome(&leasetype.JobRow{ID: 2}, &driver.JobFinish{State: leasetype.JobStateCompleted})
	if e := recvEvent(t, other, time.Second); e.Job.ID != 2 {
		t.Fatalf("remaining subscription got job %d, want 2", e.Job.ID)
	}
	if got := c.Stats().EventsDropped; got != 0 {
		t.Fatalf("Stats.EventsDropped = %d, want 0", got)
	}
}

// Subscriptions come and go, and are cancelled twice at once, while events
// are sent: run with -race.
func TestSubscribeConcurrentSendAndCancel(t *testing.T) {
	t.Parallel()
	c := newEventClient(t)
	stop := make(chan struct{})
	var senders sync.WaitGroup
	for range 4 {
		senders.Add(1)
		go func() {
			defer senders.Done()
			row := &leasetype.JobRow{ID: 1}
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.core.events.outcome(row, &driver.JobFinish{State: leasetype.JobStateCompleted})
				c.core.events.leaseLost(row, &LeaseLostError{JobID: 1})
			}
		}()
	}
	var subs sync.WaitGroup
	for range 8 {
		subs.Add(1)
		go func() {
			defer subs.Done()
			for range 50 {
				ch, cancel, err := c.SubscribeConfig(&SubscribeConfig{Kinds: []EventKind{EventKindJobCompleted, EventKindLeaseLost}, ChanSize: 4})
				if err != nil {
					t.Error(err)
					return
				}
				<-ch
				var both sync.WaitGroup
				for range 2 {
					both.Add(1)
					go func() { defer both.Done(); cancel() }()
				}
				both.Wait()
				for range ch { // closed: drains and ends
				}
			}
		}()
	}
	subs.Wait()
	close(stop)
	senders.Wait()
	if c.core.events.wants(EventKindJobCompleted) {
		t.Fatal("kinds still wanted after every subscription ended")
	}
}

func TestSubscribeConfigErrors(t *testing.T) {
	t.Parallel()
	c := newEventClient(t)
	for name, cfg := range map[string]*SubscribeConfig{
		"nil":           nil,
		"no kinds":      {},
		"unknown kind":  {Kinds: []EventKind{EventKindJobCompleted, "job_exploded"}},
		"negative size": {Kinds: []EventKind{EventKindJobCompleted}, ChanSize: -1},
	} {
		if ch, cancel, err := c.SubscribeConfig(cfg); !errors.Is(err, ErrInvalidArgs) || ch != nil || cancel != nil {
			t.Errorf("%s: SubscribeConfig = %v, want ErrInvalidArgs and no subscription", name, err)
		}
	}
	if _, _, err := c.Subscribe("job_exploded"); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Subscribe with an unknown kind = %v, want ErrInvalidArgs", err)
	}
	if _, _, err := c.Subscribe(); !errors.Is(err, ErrInvalidArgs) {
		t.Errorf("Subscribe with no kind = %v, want ErrInvalidArgs", err)
	}
}

// A subscription lasts across Stop and Start; outcomes written while Stop
// drains are sent before it returns.
func TestSubscribeAcrossStopAndStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	release, started := make(chan struct{}), make(chan struct{}, 1)
	w := NewWorkers()
	AddWorker(w, WorkFunc[noopArgs](func(context.Context, *Job[noopArgs]) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		return nil
	}))
	c, err := NewClient(newTestSQLite(t), &Config{Workers: w, PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := mustSubscribe(t, c, EventKindJobCompleted)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first, err := c.Insert(ctx, noopArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The handler must have started: a job claimed but not yet started
	// when Stop begins is released, not run.
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first job's handler never started")
	}
	close(release)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pending(events); len(got) != 1 || got[0].Job.ID != first.Job.ID || got[0].Job.State != leasetype.JobStateCompleted {
		t.Fatalf("events buffered when Stop returned: %v, want the completion of job %d", kindsOf(got), first.Job.ID)
	}

	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	second, err := c.Insert(ctx, noopArgs{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := recvEvent(t, events, 10*time.Second); e.Kind != EventKindJobCompleted || e.Job.ID != second.Job.ID {
		t.Fatalf("after restart: %s of job %d, want job_completed of job %d", e.Kind, e.Job.ID, second.Job.ID)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, ok := <-events; ok {
		t.Fatal("channel open after cancel")
	}
}

// waitRunning waits until job id is running.
func waitRunning(t *testing.T, c *Client[*sql.Tx], id int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		row, err := c.JobGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if row.State == leasetype.JobStateRunning {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %d is %s, never running", id, row.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSubscribeKindBitsDistinct(t *testing.T) {
	t.Parallel()
	var seen uint32
	for _, k := range []EventKind{EventKindJobCompleted, EventKindJobFailed, EventKindJobDiscarded, EventKindJobCancelled,
		EventKindJobSnoozed, EventKindLeaseLost, EventKindJobExpired} {
		bit := kindBit(k)
		if bit == 0 || seen&bit != 0 {
			t.Fatalf("kind %s has bit %b, already used or zero (seen %b)", k, bit, seen)
		}
		seen |= bit
	}
}

// With no subscription the job path builds no event and allocates nothing.
func TestSubscribeIdleAllocatesNothing(t *testing.T) {
	c := newEventClient(t)
	row := &leasetype.JobRow{ID: 1}
	item := &driver.JobFinish{State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
	if n := testing.AllocsPerRun(100, func() { c.core.events.outcome(row, item) }); n != 0 {
		t.Fatalf("outcome with no subscriber allocates %v times, want 0", n)
	}
}

// mustSubscribe subscribes c to kinds or fails the test.
func mustSubscribe(t *testing.T, c *Client[*sql.Tx], kinds ...EventKind) (<-chan *Event, func()) {
	t.Helper()
	ch, cancel, err := c.Subscribe(kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return ch, cancel
}
