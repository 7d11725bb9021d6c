package sqlbackend

import (
	"slices"
	"testing"

	"github.com/leasehold/leasehold/driver"
)

func TestWakeWatchChanges(t *testing.T) {
	var w WakeWatch
	w.Baseline([]WakeRow{{Queue: "a", Version: 3, Sender: 7}})
	read := func(rows ...WakeRow) []driver.InsertNotice {
		var got []driver.InsertNotice
		w.Changes(rows, func(n driver.InsertNotice) { got = append(got, n) })
		return got
	}
	steps := []struct {
		name string
		rows []WakeRow
		want []driver.InsertNotice
	}{
		{"rows before the listener are not reported", []WakeRow{{Queue: "a", Version: 3, Sender: 7}}, nil},
		{"one bump names its sender", []WakeRow{{Queue: "a", Version: 4, Sender: 8}}, []driver.InsertNotice{{Queue: "a", Sender: 8}}},
		{"a new row bumped once names its sender", []WakeRow{{Queue: "a", Version: 4, Sender: 8}, {Queue: "b", Slot: 2, Version: 1, Sender: 9}},
			[]driver.InsertNotice{{Queue: "b", Sender: 9}}},
		{"two bumps between reads name no sender", []WakeRow{{Queue: "a", Version: 6, Sender: 8}, {Queue: "b", Slot: 2, Version: 1, Sender: 9}},
			[]driver.InsertNotice{{Queue: "a"}}},
		{"each slot of a queue is its own row", []WakeRow{{Queue: "a", Version: 6, Sender: 8}, {Queue: "b", Slot: 2, Version: 2, Sender: 5}, {Queue: "b", Slot: 3, Version: 1, Sender: 6}},
			[]driver.InsertNotice{{Queue: "b", Sender: 5}, {Queue: "b", Sender: 6}}},
		{"a row gone is forgotten", []WakeRow{{Queue: "a", Version: 6, Sender: 8}}, nil},
		{"a row that comes back counts from zero", []WakeRow{{Queue: "a", Version: 6, Sender: 8}, {Queue: "b", Slot: 2, Version: 1, Sender: 4}},
			[]driver.InsertNotice{{Queue: "b", Sender: 4}}},
	}
	for _, s := range steps {
		if got := read(s.rows...); !slices.Equal(got, s.want) {
			t.Fatalf("%s: notices %+v, want %+v", s.name, got, s.want)
		}
	}
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
