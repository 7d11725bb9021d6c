package leasehold

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

func TestOwnNoticesSkipsExactlyTheExpected(t *testing.T) {
	o := newOwnNotices(func(q string) bool { return q != "elsewhere" })
	notice := func(sender int64, q string) driver.InsertNotice { return driver.InsertNotice{Queue: q, Sender: sender} }

	o.Sending(7, "q")
	if o.own(notice(7, "q")) {
		t.Fatal("expectation recorded before the listener listens")
	}

	o.setListening(true)
	o.Sending(7, "q")
	o.Sending(7, "q")
	o.Sending(7, "elsewhere") // a queue the client does not work
	o.Sending(0, "q")         // a driver that cannot name senders
	for _, n := range []driver.InsertNotice{notice(8, "q"), notice(7, "other"), notice(7, "elsewhere"), notice(0, "q")} {
		if o.own(n) {
			t.Fatalf("notice %+v taken as own", n)
		}
	}
	for i := range 2 {
		if !o.own(notice(7, "q")) {
			t.Fatalf("expected notice %d of 2 not taken as own", i+1)
		}
	}
	if o.own(notice(7, "q")) {
		t.Fatal("a third notice taken as own after two expected")
	}

	o.Sending(7, "q")
	o.Unsent(7, "q")
	o.Unsent(7, "q") // more withdrawals than expectations leave none
	if o.own(notice(7, "q")) {
		t.Fatal("a withdrawn expectation was taken")
	}

	o.Sending(9, "q")
	o.setListening(false) // the listener failed: the notice may be lost
	o.setListening(true)
	if o.own(notice(9, "q")) {
		t.Fatal("an expectation survived the listener's restart")
	}
}

func TestOwnNoticesLapse(t *testing.T) {
	o := newOwnNotices(func(string) bool { return true })
	o.setListening(true)
	o.Sending(7, "q")
	o.pending[noticeKey{7, "q"}] = pendingNotices{count: 1, expires: time.Now().Add(-time.Millisecond)}
	if o.own(driver.InsertNotice{Queue: "q", Sender: 7}) {
		t.Fatal("a lapsed expectation was taken")
	}
	if len(o.pending) != 0 {
		t.Fatalf("lapsed expectation kept: %v", o.pending)
	}

	// Senders whose notices never match (a pooler's process IDs) are
	// dropped once there are many.
	for i := range noticeSweepAt {
		o.Sending(int64(i+1), fmt.Sprint("q", i))
	}
	for k, p := range o.pending {
		p.expires = time.Now().Add(-time.Millisecond)
		o.pending[k] = p
	}
	o.Sending(-1, "q")
	if len(o.pending) != 1 {
		t.Fatalf("%d expectations after the sweep, want 1", len(o.pending))
	}
}

// TestOwnNoticesSilence: a listener that delivers nothing after this
// client's own insert is silent once the window passes; any notification
// (even one not recognised as own) ends the silence, and one that arrived
// after the insert means notifications flow.
func TestOwnNoticesSilence(t *testing.T) {
	t.Parallel()
	const window = 20 * time.Millisecond
	o := newOwnNotices(func(string) bool { return true })
	if began, _ := o.checkSilence(time.Now().Add(time.Hour), window); began {
		t.Fatal("silent without any expectation")
	}
	o.Sending(7, "q") // not listening: nothing expected
	if began, _ := o.checkSilence(time.Now().Add(time.Hour), window); began {
		t.Fatal("silent while not listening")
	}
	o.setListening(true)
	o.Sending(7, "q")
	if began, _ := o.checkSilence(time.Now(), window); began {
		t.Fatal("silent before the window passed")
	}
	time.Sleep(window + 5*time.Millisecond)
	if began, _ := o.checkSilence(time.Now(), window); !began {
		t.Fatal("not silent after the window with nothing delivered")
	}
	if began, ended := o.checkSilence(time.Now(), window); began || ended {
		t.Fatalf("silence reported again: began %v, ended %v", began, ended)
	}
	// A notification of another sender arrives: notifications flow again.
	time.Sleep(time.Millisecond)
	if o.own(driver.InsertNotice{Queue: "q", Sender: 99}) {
		t.Fatal("another sender's notice taken as own")
	}
	if _, ended := o.checkSilence(time.Now(), window); !ended {
		t.Fatal("silence did not end after a notification arrived")
	}
	// The expectation of sender 7 is still pending, but a notification
	// arrived after it was made: not silent (a pooler's own process IDs).
	time.Sleep(window + 5*time.Millisecond)
	if began, _ := o.checkSilence(time.Now(), window); began {
		t.Fatal("silent although a notification arrived after the expectation")
	}
}
