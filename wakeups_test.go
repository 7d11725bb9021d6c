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
