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
