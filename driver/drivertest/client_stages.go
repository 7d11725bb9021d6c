package drivertest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// The fault seam forwards the stage calls; a checkpoint is a lease write.
func (e *faultExecutor[TTx]) JobCheckpoint(ctx context.Context, p *driver.JobCheckpointParams) (bool, error) {
	if err := e.d.fault(ctx, true); err != nil {
		return false, err
	}
	return stageExec(e.Executor).JobCheckpoint(ctx, p)
}

func (e *faultExecutor[TTx]) JobStages(ctx context.Context, p *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	return stageExec(e.Executor).JobStages(ctx, p)
}

func (e *faultExecutor[TTx]) JobDependencies(ctx context.Context, p *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	return stageExec(e.Executor).JobDependencies(ctx, p)
}

// stageExec returns exec as a driver.StageExecutor; every backend's
// executors are one, and a backend that is not fails its tests here.
func stageExec(exec driver.Executor) driver.StageExecutor {
	se, ok := exec.(driver.StageExecutor)
	if !ok {
		return noStages{}
	}
	return se
}

type noStages struct{}

var errNoStages = errors.New("drivertest: executor does not implement driver.StageExecutor")

func (noStages) JobCheckpoint(context.Context, *driver.JobCheckpointParams) (bool, error) {
	return false, errNoStages
}
func (noStages) JobStages(context.Context, *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	return nil, errNoStages
}
func (noStages) JobDependencies(context.Context, *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	return nil, errNoStages
}

// stages reads a job's stage history or fails the test.
func (e *clientEnv[TTx]) stages(id int64) []*leasetype.StageRow {
	e.t.Helper()
	rows, err := stageExec(e.exec).JobStages(context.Background(), &driver.JobStagesParams{JobID: id})
	if err != nil {
		e.t.Fatalf("JobStages(%d): %v", id, err)
	}
	return rows
}

// stageArgs is the job of the stage tests.
type stageArgs struct {
	Name string `json:"name"`
}

func (stageArgs) Kind() string { return "drivertest_stages" }

// chargeState is what the staged handler carries from stage to stage.
type chargeState struct {
	AuthID    string `json:"auth_id,omitempty"`
	CaptureID string `json:"capture_id,omitempty"`
	LedgerID  string `json:"ledger_id,omitempty"`
}

// stageCounter counts the runs of each stage.
type stageCounter struct {
	mu   sync.Mutex
	runs map[string]int
}

func (c *stageCounter) ran(stage string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[stage]++
}

func (c *stageCounter) get(stage string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[stage]
}

// testClientCheckpoint: a handler runs three stages with Stages, each ended
// by a fenced checkpoint. Its client crashes (cut off from the database)
// after the second; the lease expires and another client's attempt resumes
// at the third stage with the state the second recorded, never running the
// first two again. CheckpointTx commits with the caller's transaction and
// writes nothing when it rolls back; bad stage input gets clear errors.
func testClientCheckpoint[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ttl := 800 * time.Millisecond
	fd := newFaultDriver(env.d)
	counter := &stageCounter{runs: map[string]int{}}
	type result struct {
		resumed          bool
		skipped          int
		state            chargeState
		badEmpty, badBig error
		badJSON          error
		txRolled, txErr  error
	}
	results := make(chan result, 4)
	crashed := make(chan struct{})
	handler := func(crash bool) leasehold.WorkFunc[stageArgs] {
		return func(ctx context.Context, j *leasehold.Job[stageArgs]) error {
			s, err := leasehold.NewStages[chargeState](j.JobRow, "authorize", "capture", "ledger")
			if err != nil {
				return err
			}
			var r result
			r.resumed = s.Resumed()
			if err := s.Do(ctx, "authorize", func(ctx context.Context, st *chargeState) error {
				counter.ran("authorize")
				st.AuthID = "auth-" + j.Args.Name
				return nil
			}); err != nil {
				return err
			}
			if err := s.Do(ctx, "capture", func(ctx context.Context, st *chargeState) error {
				counter.ran("capture")
				st.CaptureID = "cap-" + st.AuthID
				return nil
			}); err != nil {
				return err
			}
			if crash {
				// The process dies here: nothing it sends arrives.
				fd.set(faultPartition)
				close(crashed)
				<-ctx.Done()
				return ctx.Err()
			}
			if err := s.Do(ctx, "ledger", func(ctx context.Context, st *chargeState) error {
				counter.ran("ledger")
				st.LedgerID = "ledger-" + st.CaptureID
				return nil
			}); err != nil {
				return err
			}
			r.skipped, r.state = s.Skipped(), s.State
			r.badEmpty = leasehold.Checkpoint(ctx, "", nil)
			r.badBig = leasehold.Checkpoint(ctx, "big", strings.Repeat("x", leasehold.MaxStageStateBytes+1))
			r.badJSON = leasehold.Checkpoint(ctx, "func", func() {})
			// A checkpoint in a transaction that rolls back is not recorded;
			// one that commits is.
			tx, err := b.BeginTx(ctx, env.d)
			if err != nil {
				return err
			}
			r.txRolled = leasehold.CheckpointTx(ctx, tx, "rolled-back", map[string]int{"n": 1})
			if err := b.RollbackTx(ctx, tx); err != nil {
				return err
			}
			tx, err = b.BeginTx(ctx, env.d)
			if err != nil {
				return err
			}
			if r.txErr = leasehold.CheckpointTx(ctx, tx, "receipt", map[string]string{"receipt": "r-1"}); r.txErr != nil {
				_ = b.RollbackTx(ctx, tx)
				return r.txErr
			}
			if err := b.CommitTx(ctx, tx); err != nil {
				return err
			}
			results <- r
			return nil
		}
	}
	crashing := leasehold.NewWorkers()
	leasehold.AddWorker(crashing, handler(true))
	a := env.client(fd, leasehold.Config{ID: "crashing", LeaseTTL: ttl, Workers: crashing})
	job := insert(t, a, stageArgs{Name: "c1"}, &leasehold.InsertOpts{MaxAttempts: 3})
	select {
	case <-crashed:
	case <-time.After(10 * time.Second):
		t.Fatal("the first attempt did not reach the crash point")
	}
	if row := env.job(job.ID); row.Stage != "capture" || !strings.Contains(string(row.StageState), "cap-auth-c1") {
		t.Fatalf("after the crash the job records stage %q state %s, want capture with the capture id", row.Stage, row.StageState)
	}

	surviving := leasehold.NewWorkers()
	leasehold.AddWorker(surviving, handler(false))
	env.client(nil, leasehold.Config{ID: "survivor", LeaseTTL: ttl, Workers: surviving})
	row := env.waitState(job.ID, leasetype.JobStateCompleted, 15*time.Second)
	var r result
	select {
	case r = <-results:
	case <-time.After(5 * time.Second):
		t.Fatal("the second attempt reported nothing")
	}
	for stage, want := range map[string]int{"authorize": 1, "capture": 1, "ledger": 1} {
		if got := counter.get(stage); got != want {
			t.Errorf("stage %s ran %d times, want %d", stage, got, want)
		}
	}
	if !r.resumed || r.skipped != 2 {
		t.Errorf("second attempt: resumed %v skipped %d, want true and 2", r.resumed, r.skipped)
	}
	if want := (chargeState{AuthID: "auth-c1", CaptureID: "cap-auth-c1", LedgerID: "ledger-cap-auth-c1"}); r.state != want {
		t.Errorf("state after the stages = %+v, want %+v", r.state, want)
	}
	for name, err := range map[string]error{"empty stage": r.badEmpty, "oversized state": r.badBig, "non-JSON state": r.badJSON} {
		if !errors.Is(err, leasehold.ErrInvalidArgs) {
			t.Errorf("checkpoint with %s = %v, want ErrInvalidArgs", name, err)
		}
	}
	if r.badBig == nil || !strings.Contains(r.badBig.Error(), "16384") {
		t.Errorf("oversized state error %v does not name the limit", r.badBig)
	}
	if r.txRolled != nil || r.txErr != nil {
		t.Errorf("CheckpointTx = %v, %v; want nil, nil", r.txRolled, r.txErr)
	}
	if err := leasehold.Checkpoint(context.Background(), "outside", nil); !errors.Is(err, leasehold.ErrNotInHandler) {
		t.Errorf("Checkpoint outside a handler = %v, want ErrNotInHandler", err)
	}

	if row.Stage != "receipt" || string(row.StageState) == "" || !strings.Contains(string(row.StageState), "r-1") {
		t.Errorf("completed job records stage %q state %s, want receipt", row.Stage, row.StageState)
	}
	if got := env.outcomes(job.ID); len(got) != 2 || got[0] != leasetype.OutcomeLeaseExpired || got[1] != leasetype.OutcomeCompleted {
		t.Errorf("attempt outcomes = %v, want [lease_expired completed]", got)
	}
	type stageRun struct {
		stage string
		token int64
	}
	var got []stageRun
	for _, s := range env.stages(job.ID) {
		got = append(got, stageRun{s.Stage, s.Token})
	}
	want := []stageRun{{"authorize", 1}, {"capture", 1}, {"ledger", 2}, {"receipt", 2}}
	if len(got) != len(want) {
		t.Fatalf("stage history = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("stage history = %v, want %v", got, want)
		}
	}
	// A checkpoint renews the lease as a heartbeat does.
	if row.Heartbeats < 2 {
		t.Errorf("second lease counted %d renewals, want at least its 2 checkpoints", row.Heartbeats)
	}
}

// testClientCheckpointFenced: a holder paused past its lease, whose job
// another client took, cannot checkpoint: Checkpoint returns a
// *LeaseLostError and neither the job row nor the stage history changes.
func testClientCheckpointFenced[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	ttl := 600 * time.Millisecond
	fd := newFaultDriver(env.d)
	slow := newBlockWorker(t, true)
	staleErr := make(chan error, 1)
	slow.finish = func(ctx context.Context, j *leasehold.Job[blockArgs]) error {
		// The paused holder ignores its cancelled context, as a process
		// that slept through it would.
		err := leasehold.Checkpoint(context.WithoutCancel(ctx), "stale", map[string]string{"from": "paused"})
		select {
		case staleErr <- err:
		default:
		}
		return err
	}
	a := env.client(fd, leasehold.Config{ID: "paused", LeaseTTL: ttl, Workers: workersFor(slow, nil)})
	job := insert(t, a, blockArgs{Name: "fenced-checkpoint"}, nil)
	recvJob(t, slow.started, 5*time.Second)
	// The holder pauses: nothing it sends reaches the database.
	fd.set(faultBlackhole)

	fast := newBlockWorker(t, false)
	var healthyToken atomic.Int64
	fast.finish = func(ctx context.Context, j *leasehold.Job[blockArgs]) error {
		if err := leasehold.Checkpoint(ctx, "current", map[string]string{"from": "healthy"}); err != nil {
			return err
		}
		healthyToken.Store(j.Token())
		return nil
	}
	fast.releaseAll()
	env.client(nil, leasehold.Config{ID: "healthy", LeaseTTL: ttl, Workers: workersFor(fast, nil)})
	env.waitState(job.ID, leasetype.JobStateCompleted, 10*time.Second)

	fd.set(faultNone)
	slow.releaseAll()
	var err error
	select {
	case err = <-staleErr:
	case <-time.After(5 * time.Second):
		t.Fatal("the paused holder did not try its checkpoint")
	}
	var lle *leasehold.LeaseLostError
	if !errors.As(err, &lle) || lle.JobID != job.ID || lle.Token != 1 {
		t.Fatalf("stale checkpoint = %v, want *LeaseLostError for job %d token 1", err, job.ID)
	}
	row := env.job(job.ID)
	if row.Stage != "current" || !strings.Contains(string(row.StageState), "healthy") || row.LeaseToken < 2 {
		t.Fatalf("job after the stale checkpoint: stage %q state %s token %d; want the healthy holder's", row.Stage, row.StageState, row.LeaseToken)
	}
	hist := env.stages(job.ID)
	if len(hist) == 0 {
		t.Fatal("stage history is empty, want the healthy holder's checkpoint")
	}
	for _, h := range hist {
		if h.Stage != "current" || h.Token == 1 {
			t.Fatalf("stage history = %+v, want only the healthy holder's checkpoints (never token 1's)", hist)
		}
	}
	if last := hist[len(hist)-1]; last.Token != healthyToken.Load() {
		t.Fatalf("last checkpoint by token %d, want the completing holder's %d", last.Token, healthyToken.Load())
	}
	if a.Stats().FencedWrites < 1 {
		t.Errorf("the refused checkpoint was not counted as a fenced write")
	}
}
