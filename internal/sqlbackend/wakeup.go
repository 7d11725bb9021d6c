package sqlbackend

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/leasehold/leasehold/driver"
)

// Wake-up rows stand in for LISTEN/NOTIFY on the backends that have none
// (migration 6, leasehold_wakeup): an insert transaction that makes jobs
// available bumps its queue's row once (version + 1, and its sender appended
// to the row's last WakeSenders senders), and each listening client reads
// the rows every few milliseconds and turns every bump since its last read
// into a driver.InsertNotice. The row commits with the jobs, so a bump that
// can be read names jobs that can be claimed.

// WakeSenders is the number of latest senders a wake-up row keeps, each as
// WakeSenderWidth decimal digits, zero-padded, oldest first.
const (
	WakeSenders     = 16
	WakeSenderWidth = 19
)

// WakeRow is one wake-up row as read by a listener. Slot is 0 where the
// backend keeps one row per queue. Senders is the row's senders column.
type WakeRow struct {
	Queue   string
	Slot    int64
	Version int64
	Senders string
}

type wakeKey struct {
	queue string
	slot  int64
}

// WakeWatch remembers the versions a listener has seen and reports the bumps
// since.
type WakeWatch struct {
	seen map[wakeKey]int64
}

// Baseline records rows as seen without reporting them: they predate the
// listener.
func (w *WakeWatch) Baseline(rows []WakeRow) {
	w.seen = make(map[wakeKey]int64, len(rows))
	for _, r := range rows {
		w.seen[wakeKey{r.Queue, r.Slot}] = r.Version
	}
}

// Changes calls fn with one notice per bump of a row since the last read,
// naming the bump's sender; rows, the whole table, replace what was seen.
// A row bumped more often between two reads than it keeps senders
// (WakeSenders) gets one more notice naming none (Sender 0), for the bumps
// whose senders it no longer has: a notice without a sender wakes every
// client that works the queue, and a client must never take another's
// insert for its own.
func (w *WakeWatch) Changes(rows []WakeRow, fn func(driver.InsertNotice)) {
	if w.seen == nil {
		w.seen = map[wakeKey]int64{}
	}
	live := make(map[wakeKey]struct{}, len(rows))
	for _, r := range rows {
		k := wakeKey{r.Queue, r.Slot}
		live[k] = struct{}{}
		prev := w.seen[k] // 0 for a row created since the last read
		if r.Version == prev {
			continue
		}
		w.seen[k] = r.Version
		bumps := r.Version - prev
		if bumps < 0 { // the table was recreated
			bumps = WakeSenders + 1
		}
		senders := parseSenders(r.Senders)
		known := senders[len(senders)-int(min(bumps, int64(len(senders)))):]
		for _, s := range known {
			fn(driver.InsertNotice{Queue: r.Queue, Sender: s})
		}
		if bumps > int64(len(known)) {
			fn(driver.InsertNotice{Queue: r.Queue})
		}
	}
	for k := range w.seen {
		if _, ok := live[k]; !ok {
			delete(w.seen, k)
		}
	}
}

// parseSenders splits a senders column into its senders, oldest first. A
// malformed entry reads as 0, which names no sender.
func parseSenders(col string) []int64 {
	out := make([]int64, 0, len(col)/WakeSenderWidth)
	for len(col) >= WakeSenderWidth {
		n, err := strconv.ParseInt(col[:WakeSenderWidth], 10, 64)
		if err != nil {
			n = 0
		}
		out = append(out, n)
		col = col[WakeSenderWidth:]
	}
	return out
}

// WakeSender is the sender of one insert's wake-ups: the identity written
// into the rows it bumps and told to the client's SenderTracker before the
// commit. Each transaction the driver runs on its pool gets a random
// identity of its own, so a notice is recognised as the client's own only
// when it is of exactly that transaction. A nil *WakeSender (an insert in a
// caller's transaction, or without a tracker) writes sender 0 and reports
// nothing.
type WakeSender struct {
	tracker driver.SenderTracker
	id      int64
	queues  []string // said Sending and not yet withdrawn
}

// NewWakeSender returns the sender of an insert that reports to tracker, or
// nil when tracker is nil.
func NewWakeSender(tracker driver.SenderTracker) *WakeSender {
	if tracker == nil {
		return nil
	}
	return &WakeSender{tracker: tracker, id: rand.Int64N(math.MaxInt64-1) + 1}
}

// ID is the identity to write into the wake-up rows: 0 for a nil sender.
func (s *WakeSender) ID() int64 {
	if s == nil {
		return 0
	}
	return s.id
}

// Sending tells the tracker that the transaction will wake queues when it
// commits. Call it before the bump, inside the transaction.
func (s *WakeSender) Sending(queues []string) {
	if s == nil {
		return
	}
	for _, q := range queues {
		s.tracker.Sending(s.id, q)
		s.queues = append(s.queues, q)
	}
}

// Unsent withdraws every Sending not yet withdrawn: the transaction rolled
// back, or its commit failed or was not confirmed.
func (s *WakeSender) Unsent() {
	if s == nil {
		return
	}
	for _, q := range s.queues {
		s.tracker.Unsent(s.id, q)
	}
	s.queues = s.queues[:0]
}

// AddQueue appends queue to queues unless it is there, keeping the order of
// first appearance.
func AddQueue(queues []string, queue string) []string {
	if slices.Contains(queues, queue) {
		return queues
	}
	return append(queues, queue)
}
