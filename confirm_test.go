package leasehold

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// historyExec is a finishExecutor over an in-memory attempt history that
// refuses every outcome write and counts the statements it is sent.
type historyExec struct {
	mu       sync.Mutex
	rows     map[driver.LeaseRef]*leasetype.AttemptRow
	finishes int
	reads    [][]driver.LeaseRef // the leases each JobAttempts call named
}

func (e *historyExec) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finishes++
	return nil, nil // refused: the jobs are no longer running
}

func (e *historyExec) JobAttempts(ctx context.Context, p *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reads = append(e.reads, p.Leases)
	var out []*leasetype.AttemptRow
	for _, ref := range p.Leases {
		if a := e.rows[ref]; a != nil {
			out = append(out, a)
		}
	}
	return out, nil
}

func (e *historyExec) counts() (finishes int, reads [][]driver.LeaseRef) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finishes, append([][]driver.LeaseRef(nil), e.reads...)
}

// completedBy is the attempt row of a completion by owner.
func completedBy(id, token int64, owner string) *leasetype.AttemptRow {
	return &leasetype.AttemptRow{JobID: id, Token: token, Owner: owner, Outcome: leasetype.OutcomeCompleted}
}

// txLease is a lease whose handler completed it with CompleteTx.
func txLease(id int64) *lease {
	l := newLease(&leasetype.JobRow{ID: id, LeaseToken: 1}, time.Minute, nil, time.Now())
	l.startCompleting(time.Now().Add(time.Minute))
	l.completedTx.Store(true)
	return l
}

// TestCompleterReadsBackRefusedInOneStatement: the refused outcomes of a
// batch are read back in one statement, not one per job; those found
// written by this client count as written, the others as lost leases.
func TestCompleterReadsBackRefusedInOneStatement(t *testing.T) {
	t.Parallel()
	exec := &historyExec{rows: map[driver.LeaseRef]*leasetype.AttemptRow{
		{ID: 1, Token: 1}: completedBy(1, 1, "owner"),
		{ID: 2, Token: 1}: completedBy(2, 1, "owner"),
		{ID: 3, Token: 1}: completedBy(3, 1, "another owner"),
	}}
	stats := &statsCounters{}
	c := newCompleter(exec, "owner", &sync.RWMutex{}, 100, slog.New(slog.DiscardHandler), stats)
	var batch []*finishRequest
	results := map[int64]error{}
	for id := int64(1); id <= 4; id++ {
		item := &driver.JobFinish{ID: id, Token: 1, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
		batch = append(batch, &finishRequest{item: item, lease: txLease(id), done: waiterFunc(func(err error) { results[id] = err })})
	}
	c.report(context.Background(), batch, nil)
	if _, reads := exec.counts(); len(reads) != 1 || len(reads[0]) != 4 {
		t.Fatalf("read-back statements %v, want one naming the 4 refused leases", reads)
	}
	for id, wantLost := range map[int64]bool{1: false, 2: false, 3: true, 4: true} {
		if got := IsLeaseLost(results[id]); got != wantLost {
			t.Errorf("job %d: result %v, want lease lost %v", id, results[id], wantLost)
		}
	}
	if n := stats.ambiguousCommits.Load(); n != 0 {
		t.Errorf("ambiguous commits = %d, want 0: a CompleteTx handler returned nil", n)
	}
}

// TestConfirmerBatchesAndWritesNothing: CompleteTx completions are
// confirmed by reads that each name many leases, and no outcome is written
// for them; one whose commit is missing goes to notCommitted.
func TestConfirmerBatchesAndWritesNothing(t *testing.T) {
	t.Parallel()
	const n = 50
	exec := &historyExec{rows: map[driver.LeaseRef]*leasetype.AttemptRow{}}
	for id := int64(1); id <= n; id++ {
		exec.rows[driver.LeaseRef{ID: id, Token: 1}] = completedBy(id, 1, "owner")
	}
	c := newCompleter(exec, "owner", &sync.RWMutex{}, 1000, slog.New(slog.DiscardHandler), &statsCounters{})
	var (
		mu        sync.Mutex
		confirmed = map[int64]bool{}
		missing   []int64
		done      = make(chan struct{}, n+1)
	)
	running := func() int { return 100 } // other jobs run: confirmations wait for one another
	cf := newTxConfirmer(c, slog.New(slog.DiscardHandler), running, func(l *lease) {
		mu.Lock()
		missing = append(missing, l.row.ID)
		mu.Unlock()
		done <- struct{}{}
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		cf.run(ctx)
		close(stopped)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	for id := int64(1); id <= n+1; id++ { // job n+1's commit is missing
		item := &driver.JobFinish{ID: id, Token: 1, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
		cf.confirm(&finishRequest{item: item, lease: txLease(id), done: waiterFunc(func(err error) {
			mu.Lock()
			confirmed[id] = err == nil
			mu.Unlock()
			done <- struct{}{}
		})})
		time.Sleep(time.Millisecond)
	}
	for range n + 1 {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("confirmations missing after 5s")
		}
	}
	finishes, reads := exec.counts()
	if finishes != 0 {
		t.Fatalf("outcome writes = %d, want none for CompleteTx completions", finishes)
	}
	if len(reads) < 1 || len(reads) > n/5 {
		t.Fatalf("confirming reads = %d, want few (they batch) for %d jobs", len(reads), n+1)
	}
	mu.Lock()
	defer mu.Unlock()
	for id := int64(1); id <= n; id++ {
		if !confirmed[id] {
			t.Fatalf("job %d not confirmed", id)
		}
	}
	if len(missing) != 1 || missing[0] != n+1 {
		t.Fatalf("not committed = %v, want [%d]", missing, n+1)
	}
}
