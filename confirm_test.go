package leasehold

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlitetest"
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
	c.report(context.Background(), batch, nil, nil)
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

// alongDriver is a driver whose executor reads attempt rows and claims in
// one call (driver.AttemptsClaimer, here the two calls one after the
// other), counting the calls that carried confirmations and the
// confirming reads sent alone.
type alongDriver struct {
	driver.Driver[*sql.Tx]
	mu                 sync.Mutex
	along, alongLeases int
	alone, aloneLeases int
}

func (d *alongDriver) GetExecutor() driver.Executor {
	return &alongExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

type alongExecutor struct {
	driver.Executor
	d *alongDriver
}

func (e *alongExecutor) JobAttempts(ctx context.Context, p *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	if len(p.Leases) > 0 {
		e.d.mu.Lock()
		e.d.alone++
		e.d.aloneLeases += len(p.Leases)
		e.d.mu.Unlock()
	}
	return e.Executor.JobAttempts(ctx, p)
}

func (e *alongExecutor) JobAttemptsAndClaim(ctx context.Context, a *driver.JobAttemptsParams, c *driver.JobClaimParams) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	e.d.mu.Lock()
	e.d.along++
	e.d.alongLeases += len(a.Leases)
	e.d.mu.Unlock()
	found, err := e.Executor.JobAttempts(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	rows, err := e.Executor.JobClaim(ctx, c)
	return found, rows, err
}

// TestClaimsCarryConfirmations: with an executor that reads attempts and
// claims in one round trip, the claims of a busy queue carry the
// confirmations of CompleteTx commits; every job is confirmed once, and a
// transaction that rolled back after CompleteTx is still caught (its job
// retried), whichever read confirms it.
func TestClaimsCarryConfirmations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, db := sqlitetest.Open(t)
	if _, err := db.ExecContext(ctx, "CREATE TABLE ledger (job_id INTEGER PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	d := &alongDriver{Driver: base}
	const jobs = 400
	var rolledBack sync.Map // job IDs whose first transaction rolled back
	w := NewWorkers()
	AddWorker(w, WorkFunc[overlapArgs](func(ctx context.Context, j *Job[overlapArgs]) error {
		c, err := ClientFromContext[*sql.Tx](ctx)
		if err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() //nolint:errcheck // no-op after commit
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger (job_id) VALUES (?)", j.ID); err != nil {
			return err
		}
		if err := c.CompleteTx(ctx, tx, j.JobRow); err != nil {
			return err
		}
		if j.Args.N%50 == 0 {
			if _, again := rolledBack.LoadOrStore(j.ID, true); !again {
				return nil // rolled back by the deferred Rollback, yet nil
			}
		}
		return tx.Commit()
	}))
	c, err := NewClient(d, &Config{Workers: w, Logger: slog.New(slog.DiscardHandler),
		Queues: map[string]QueueConfig{defaultQueue: {MaxWorkers: 20}}})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]InsertManyParams, jobs)
	for i := range params {
		params[i] = InsertManyParams{Args: overlapArgs{N: i}}
	}
	if _, err := c.InsertManyFast(ctx, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for c.Stats().Completed < jobs && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Completed != jobs {
		t.Fatalf("completed %d of %d jobs (stats %+v)", st.Completed, jobs, st)
	}
	var ledger, retried int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM ledger").Scan(&ledger); err != nil {
		t.Fatal(err)
	}
	rolledBack.Range(func(any, any) bool { retried++; return true })
	if ledger != jobs || retried != jobs/50 {
		t.Fatalf("ledger rows %d (want %d), rolled-back first attempts %d (want %d)", ledger, jobs, retried, jobs/50)
	}
	// Each rolled-back job failed its first attempt and completed a later
	// one. Other failed attempts may only be the handler's own transaction
	// refused the write lock on a loaded machine (SQLITE_BUSY), which its
	// retry repairs, as the ledger shows; any other failure is a defect.
	rows, err := db.QueryContext(ctx, "SELECT job_id, attempt, outcome, coalesce(error, '') FROM leasehold_attempt ORDER BY job_id, attempt")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	caught := map[int64]bool{}
	var failed int64
	for rows.Next() {
		var (
			id, attempt int64
			outcome     leasetype.AttemptOutcome
			msg         string
		)
		if err := rows.Scan(&id, &attempt, &outcome, &msg); err != nil {
			t.Fatal(err)
		}
		if outcome != leasetype.OutcomeFailed {
			continue
		}
		failed++
		if _, rb := rolledBack.Load(id); rb && attempt == 1 {
			caught[id] = true
		} else if !strings.Contains(msg, "SQLITE_BUSY") {
			t.Errorf("job %d attempt %d failed: %s", id, attempt, msg)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(caught) != retried || st.Failed != failed {
		t.Fatalf("rolled-back first attempts recorded failed: %d of %d; failed attempts %d, counted failed %d", len(caught), retried, failed, st.Failed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.along == 0 || d.alongLeases == 0 {
		t.Fatalf("no claim carried a confirmation (%d confirming reads alone, of %d leases)", d.alone, d.aloneLeases)
	}
	if d.alongLeases+d.aloneLeases < jobs {
		t.Fatalf("%d confirmations read along claims and %d alone, want at least one per job (%d)", d.alongLeases, d.aloneLeases, jobs)
	}
	t.Logf("confirmations: %d leases in %d claims, %d leases in %d reads alone", d.alongLeases, d.along, d.aloneLeases, d.alone)
}
