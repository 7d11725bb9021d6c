package sqlbackend

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

// senders formats a senders column, oldest first.
func senders(ids ...int64) string {
	var b strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&b, "%0*d", WakeSenderWidth, id)
	}
	return b.String()
}

func TestWakeWatchChanges(t *testing.T) {
	var w WakeWatch
	w.Baseline([]WakeRow{{Queue: "a", Version: 3, Senders: senders(5, 6, 7)}})
	read := func(rows ...WakeRow) []driver.InsertNotice {
		var got []driver.InsertNotice
		w.Changes(rows, func(n driver.InsertNotice) { got = append(got, n) })
		return got
	}
	full := make([]int64, WakeSenders)
	for i := range full {
		full[i] = int64(100 + i)
	}
	steps := []struct {
		name string
		rows []WakeRow
		want []driver.InsertNotice
	}{
		{"rows before the listener are not reported", []WakeRow{{Queue: "a", Version: 3, Senders: senders(5, 6, 7)}}, nil},
		{"one bump names its sender", []WakeRow{{Queue: "a", Version: 4, Senders: senders(5, 6, 7, 8)}},
			[]driver.InsertNotice{{Queue: "a", Sender: 8}}},
		{"a new row's bumps name their senders", []WakeRow{{Queue: "a", Version: 4, Senders: senders(5, 6, 7, 8)}, {Queue: "b", Slot: 2, Version: 2, Senders: senders(9, 0)}},
			[]driver.InsertNotice{{Queue: "b", Sender: 9}, {Queue: "b"}}},
		{"two bumps between reads name both senders", []WakeRow{{Queue: "a", Version: 6, Senders: senders(5, 6, 7, 8, 10, 11)}, {Queue: "b", Slot: 2, Version: 2, Senders: senders(9, 0)}},
			[]driver.InsertNotice{{Queue: "a", Sender: 10}, {Queue: "a", Sender: 11}}},
		{"more bumps than senders kept add one notice without a sender", []WakeRow{{Queue: "a", Version: 6 + WakeSenders + 2, Senders: senders(full...)}},
			append(notices("a", full), driver.InsertNotice{Queue: "a"})},
		{"each slot of a queue is its own row", []WakeRow{{Queue: "a", Version: 6 + WakeSenders + 2, Senders: senders(full...)}, {Queue: "b", Slot: 2, Version: 1, Senders: senders(4)}, {Queue: "b", Slot: 3, Version: 1, Senders: senders(6)}},
			[]driver.InsertNotice{{Queue: "b", Sender: 4}, {Queue: "b", Sender: 6}}},
		{"a row gone is forgotten", []WakeRow{{Queue: "b", Slot: 2, Version: 1, Senders: senders(4)}}, nil},
		{"a row that comes back counts from zero", []WakeRow{{Queue: "a", Version: 1, Senders: senders(3)}, {Queue: "b", Slot: 2, Version: 1, Senders: senders(4)}},
			[]driver.InsertNotice{{Queue: "a", Sender: 3}}},
		{"a version that went back names no sender it cannot know", []WakeRow{{Queue: "a", Version: 1, Senders: senders(3)}, {Queue: "b", Slot: 2, Version: 0, Senders: ""}},
			[]driver.InsertNotice{{Queue: "b"}}},
	}
	for _, s := range steps {
		if got := read(s.rows...); !slices.Equal(got, s.want) {
			t.Fatalf("%s: notices %+v, want %+v", s.name, got, s.want)
		}
	}
}

func notices(queue string, ids []int64) []driver.InsertNotice {
	out := make([]driver.InsertNotice, len(ids))
	for i, id := range ids {
		out[i] = driver.InsertNotice{Queue: queue, Sender: id}
	}
	return out
}

type countingTracker struct{ balance map[int64]int }

func (c *countingTracker) Sending(sender int64, _ string) { c.balance[sender]++ }
func (c *countingTracker) Unsent(sender int64, _ string)  { c.balance[sender]-- }

func TestWakeSender(t *testing.T) {
	var none *WakeSender
	if none.ID() != 0 || NewWakeSender(nil) != nil {
		t.Fatal("a sender without a tracker must be nil, with ID 0")
	}
	none.Sending([]string{"q"}) // no panic
	none.Unsent()
	tr := &countingTracker{balance: map[int64]int{}}
	a, b := NewWakeSender(tr), NewWakeSender(tr)
	if a.ID() <= 0 || a.ID() == b.ID() {
		t.Fatalf("sender IDs %d and %d: want positive and distinct", a.ID(), b.ID())
	}
	a.Sending([]string{"q", "r"})
	if tr.balance[a.ID()] != 2 {
		t.Fatalf("balance %d after two Sending, want 2", tr.balance[a.ID()])
	}
	a.Unsent()
	a.Unsent()
	if tr.balance[a.ID()] != 0 {
		t.Fatalf("balance %d after Unsent, want 0", tr.balance[a.ID()])
	}
}
