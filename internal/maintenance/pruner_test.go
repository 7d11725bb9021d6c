package maintenance

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// pruneExec has jobs rows of finished jobs and attempts attempt rows to
// delete, and records what each delete asked for.
type pruneExec struct {
	jobs, attempts int64
	jobCalls       []*driver.JobPruneParams
	attemptCalls   int
	windows        int64 // ended key rate windows
	windowCalls    int
}

func (e *pruneExec) KeyWindowPrune(ctx context.Context, p *driver.KeyWindowPruneParams) (int64, error) {
	e.windowCalls++
	n := min(e.windows, int64(p.Limit))
	e.windows -= n
	return n, nil
}

func (e *pruneExec) JobPrune(ctx context.Context, p *driver.JobPruneParams) (int64, error) {
	e.jobCalls = append(e.jobCalls, p)
	n := min(e.jobs, int64(p.Limit))
	e.jobs -= n
	return n, nil
}

func (e *pruneExec) AttemptPrune(ctx context.Context, p *driver.AttemptPruneParams) (int64, error) {
	e.attemptCalls++
	n := min(e.attempts, int64(p.Limit))
	e.attempts -= n
	return n, nil
}

func TestPrunerRunOnce(t *testing.T) {
	t.Parallel()
	exec := &pruneExec{jobs: 2*PruneBatch + 5, attempts: PruneMaxBatches*PruneBatch + 1, windows: PruneBatch + 3}
	var pruned int64
	p := &Pruner{
		Exec: exec, Logger: slog.New(slog.DiscardHandler),
		Completed: time.Hour, Cancelled: -1, Discarded: time.Hour, Attempts: time.Hour,
		OnPruned: func(n int64) { pruned += n },
	}
	if err := p.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One retention for completed and discarded: one delete per batch for
	// both, until a batch is short; cancelled (negative) is kept forever.
	if len(exec.jobCalls) != 3 {
		t.Fatalf("%d job deletes, want 3", len(exec.jobCalls))
	}
	states := slices.Clone(exec.jobCalls[0].States)
	slices.Sort(states)
	if want := []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateDiscarded}; !slices.Equal(states, want) {
		t.Fatalf("deleted states %v, want %v", states, want)
	}
	// A round stops after PruneMaxBatches, leaving the rest for the next.
	if exec.attemptCalls != PruneMaxBatches || exec.attempts != 1 {
		t.Fatalf("%d attempt deletes leaving %d rows, want %d leaving 1", exec.attemptCalls, exec.attempts, PruneMaxBatches)
	}
	// Ended key rate windows go too, in batches.
	if exec.windowCalls != 2 || exec.windows != 0 {
		t.Fatalf("%d key window deletes leaving %d rows, want 2 leaving 0", exec.windowCalls, exec.windows)
	}
	if want := int64(2*PruneBatch + 5 + PruneMaxBatches*PruneBatch + PruneBatch + 3); pruned != want {
		t.Fatalf("OnPruned counted %d rows, want %d", pruned, want)
	}
}

// keyPruneExec is a pruneExec that keeps queue keys (driver.QueueKeyPruner):
// keys are "k0" to "kN-1" of queue "q", those in stale are deleted when
// checked; it records each step's After.
type keyPruneExec struct {
	pruneExec
	keys   []string
	stale  map[string]bool
	afters []driver.QueueKey
}

func (e *keyPruneExec) QueueKeyPrune(ctx context.Context, p *driver.QueueKeyPruneParams) (*driver.QueueKeyPruneResult, error) {
	e.afters = append(e.afters, p.After)
	res := &driver.QueueKeyPruneResult{}
	checked := 0
	var kept []string
	for _, k := range e.keys {
		if (p.After == driver.QueueKey{} || k > p.After.Key) && checked < p.Scan {
			checked++
			if checked == p.Scan {
				res.Next = &driver.QueueKey{Queue: "q", Key: k}
			}
			if e.stale[k] {
				res.Deleted++
				continue
			}
		}
		kept = append(kept, k)
	}
	e.keys = kept
	return res, nil
}

// TestPrunerKeySteps: a round prunes the queue keys in steps of KeyScan,
// each going on after the last key the previous one checked, until a step
// reaches the end; the deleted keys are counted.
func TestPrunerKeySteps(t *testing.T) {
	t.Parallel()
	exec := &keyPruneExec{keys: []string{"a", "b", "c", "d", "e"}, stale: map[string]bool{"b": true, "e": true}}
	var pruned int64
	p := &Pruner{
		Exec: exec, Logger: slog.New(slog.DiscardHandler),
		Completed: -1, Cancelled: -1, Discarded: -1, Attempts: -1, KeyScan: 2,
		OnPruned: func(n int64) { pruned += n },
	}
	if err := p.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []driver.QueueKey{{}, {Queue: "q", Key: "b"}, {Queue: "q", Key: "d"}}
	if !slices.Equal(exec.afters, want) {
		t.Fatalf("steps went on after %v, want %v", exec.afters, want)
	}
	if !slices.Equal(exec.keys, []string{"a", "c", "d"}) || pruned != 2 {
		t.Fatalf("keys left %v, %d counted pruned; want [a c d], 2", exec.keys, pruned)
	}
}
