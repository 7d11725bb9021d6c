package mysql

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// refuseClaimsSQL makes every claim's UPDATE fail: a job that becomes
// running raises an error, which stops the statement and its transaction.
const refuseClaimsSQL = `CREATE TRIGGER refuse_claims BEFORE UPDATE ON leasehold_job FOR EACH ROW
IF NEW.state = 'running' AND OLD.state <> 'running' THEN
	SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'claim refused by the test';
END IF`

// finishClaimVariants returns, for each way the driver runs its own
// transactions, a driver on a fresh database: connTx (multi-statement
// DSN) and database/sql transactions (a DSN without multiStatements and
// interpolateParams).
func finishClaimVariants(t *testing.T) map[string]func(t *testing.T) *Driver {
	return map[string]func(t *testing.T) *Driver{
		"connTx": func(t *testing.T) *Driver { return newTestDriver(t) },
		"sql.Tx": func(t *testing.T) *Driver {
			db, _ := countedDB(t, newTestDriver(t), func(cfg *mysqldriver.Config) {
				cfg.MultiStatements, cfg.InterpolateParams = false, false
			})
			return New(db)
		},
	}
}

// claimQ claims up to n jobs of queue q for owner w.
func claimQ(n int) *driver.JobClaimParams {
	return &driver.JobClaimParams{Queue: "q", Max: n, Owner: "w", DefaultLeaseTTL: time.Minute}
}

// completion is the plain completion of job's lease.
func completion(job *leasetype.JobRow) *driver.JobFinish {
	return &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
}

// TestFinishAndClaimFailsWhole: when the claim's UPDATE fails, the
// outcomes sent with it do not take effect either: the finished job is
// still running on its lease, without an attempt row, and the job to claim
// is still available. The connection is left with no transaction open: the
// same call succeeds once the claim can.
func TestFinishAndClaimFailsWhole(t *testing.T) {
	t.Parallel()
	for name, newDriver := range finishClaimVariants(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			d := newDriver(t)
			exec := d.GetExecutor()
			fc := exec.(driver.FinishClaimer)
			insertJobs(t, exec, 2)
			jobs, err := exec.JobClaim(ctx, claimQ(1))
			if err != nil || len(jobs) != 1 {
				t.Fatalf("claim = %d jobs, %v; want 1", len(jobs), err)
			}
			done := jobs[0]
			if _, err := d.DB().ExecContext(ctx, refuseClaimsSQL); err != nil {
				t.Fatalf("create trigger: %v", err)
			}
			finish := &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{completion(done)}}
			_, _, err = fc.JobFinishAndClaim(ctx, finish, claimQ(5))
			if err == nil || !strings.Contains(err.Error(), "claim refused by the test") {
				t.Fatalf("JobFinishAndClaim with the claim refused = %v, want the trigger's error", err)
			}
			got, err := exec.JobGet(ctx, &driver.JobGetParams{ID: done.ID})
			if err != nil {
				t.Fatal(err)
			}
			if got.State != leasetype.JobStateRunning || got.LeaseToken != done.LeaseToken || got.LeaseOwner != "w" {
				t.Errorf("finished job after the failed claim: %s token %d owner %q, want still running on token %d of w", got.State, got.LeaseToken, got.LeaseOwner, done.LeaseToken)
			}
			attempts, err := exec.JobAttempts(ctx, &driver.JobAttemptsParams{JobID: done.ID})
			if err != nil || len(attempts) != 0 {
				t.Errorf("attempt rows of the finished job after the failed claim = %d, %v; want none", len(attempts), err)
			}
			available, err := exec.JobList(ctx, &driver.JobListParams{States: []leasetype.JobState{leasetype.JobStateAvailable}})
			if err != nil || len(available) != 1 {
				t.Errorf("available jobs after the failed claim = %d, %v; want the one to claim", len(available), err)
			}

			if _, err := d.DB().ExecContext(ctx, "DROP TRIGGER refuse_claims"); err != nil {
				t.Fatalf("drop trigger: %v", err)
			}
			written, claimed, err := fc.JobFinishAndClaim(ctx, finish, claimQ(5))
			if err != nil || len(written) != 1 || len(claimed) != 1 {
				t.Fatalf("JobFinishAndClaim once claims may run = %v, %d claimed, %v; want [%d] and 1", written, len(claimed), err, done.ID)
			}
		})
	}
}

// TestFinishAndClaimReleasesDependents: a finished job's dependents are
// released before the claim reads, so the claim sent with the outcome
// leases the dependent it made available.
func TestFinishAndClaimReleasesDependents(t *testing.T) {
	t.Parallel()
	for name, newDriver := range finishClaimVariants(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			exec := newDriver(t).GetExecutor()
			fc := exec.(driver.FinishClaimer)
			job := func(dependsOn ...int) *driver.JobInsertParams {
				return &driver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 3, DependsOnIndex: dependsOn}
			}
			inserted, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{job(), job(0)}})
			if err != nil {
				t.Fatalf("insert: %v", err)
			}
			child := inserted[1].Job
			if child.State != leasetype.JobStatePending {
				t.Fatalf("dependent inserted %s, want pending", child.State)
			}
			jobs, err := exec.JobClaim(ctx, claimQ(5))
			if err != nil || len(jobs) != 1 || jobs[0].ID != inserted[0].Job.ID {
				t.Fatalf("claim = %d jobs, %v; want the parent alone", len(jobs), err)
			}
			written, claimed, err := fc.JobFinishAndClaim(ctx, &driver.JobFinishParams{Owner: "w", Items: []*driver.JobFinish{completion(jobs[0])}}, claimQ(5))
			if err != nil {
				t.Fatalf("JobFinishAndClaim: %v", err)
			}
			if len(written) != 1 || written[0] != jobs[0].ID {
				t.Errorf("finished %v, want [%d]", written, jobs[0].ID)
			}
			if len(claimed) != 1 || claimed[0].ID != child.ID || claimed[0].State != leasetype.JobStateRunning {
				t.Fatalf("claimed %d jobs, want the dependent %d running", len(claimed), child.ID)
			}
			got, err := exec.JobGet(ctx, &driver.JobGetParams{ID: child.ID})
			if err != nil || got.State != leasetype.JobStateRunning || got.LeaseToken != claimed[0].LeaseToken {
				t.Errorf("dependent reads back %v, %v; want running on token %d", got, err, claimed[0].LeaseToken)
			}
		})
	}
}

// TestFinishMixedBatchWritesExactlyTheHeld: a batch of completions that
// mixes held leases, a lost one (a stale token) and a job with a
// dependent is written exactly where the lease is held: JobFinish and
// JobFinishAndClaim return those IDs in input order, each with one
// completed attempt row, the lost lease's job stays running without one,
// and the dependent of the finished parent becomes claimable. It covers
// the way back from completeHeld, which writes nothing when a lease of the
// batch is lost or a job has dependents, to the locking path.
func TestFinishMixedBatchWritesExactlyTheHeld(t *testing.T) {
	t.Parallel()
	for name, newDriver := range finishClaimVariants(t) {
		for _, withClaim := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/claim=%v", name, withClaim), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				exec := newDriver(t).GetExecutor()
				job := func(dependsOn ...int) *driver.JobInsertParams {
					return &driver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1, EncodedArgs: []byte(`{}`), Metadata: []byte(`{}`), MaxAttempts: 3, DependsOnIndex: dependsOn}
				}
				inserted, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{job(), job(0), job(), job(), job()}})
				if err != nil {
					t.Fatalf("insert: %v", err)
				}
				parent, child := inserted[0].Job.ID, inserted[1].Job.ID
				jobs, err := exec.JobClaim(ctx, claimQ(10))
				if err != nil || len(jobs) != 4 {
					t.Fatalf("claim = %d jobs, %v; want the parent and three others", len(jobs), err)
				}
				byID := map[int64]*leasetype.JobRow{}
				for _, j := range jobs {
					byID[j.ID] = j
				}
				a, b, c := inserted[2].Job.ID, inserted[3].Job.ID, inserted[4].Job.ID
				lost := completion(byID[b])
				lost.Token++
				items := []*driver.JobFinish{completion(byID[c]), lost, completion(byID[parent]), completion(byID[a])}
				want := []int64{c, parent, a}
				var written []int64
				var claimed []*leasetype.JobRow
				if withClaim {
					written, claimed, err = exec.(driver.FinishClaimer).JobFinishAndClaim(ctx, &driver.JobFinishParams{Owner: "w", Items: items}, claimQ(10))
				} else {
					written, err = exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: items})
				}
				if err != nil {
					t.Fatalf("finish: %v", err)
				}
				if !slices.Equal(written, want) {
					t.Errorf("written %v, want %v (the held leases, in input order)", written, want)
				}
				for _, id := range []int64{a, b, c, parent} {
					got, err := exec.JobGet(ctx, &driver.JobGetParams{ID: id})
					if err != nil {
						t.Fatal(err)
					}
					attempts, err := exec.JobAttempts(ctx, &driver.JobAttemptsParams{JobID: id})
					if err != nil {
						t.Fatal(err)
					}
					if id == b {
						if got.State != leasetype.JobStateRunning || len(attempts) != 0 {
							t.Errorf("job %d of the lost lease: %s with %d attempt rows, want running with none", id, got.State, len(attempts))
						}
						continue
					}
					if got.State != leasetype.JobStateCompleted || got.FinalizedAt == nil || len(attempts) != 1 ||
						attempts[0].Outcome != leasetype.OutcomeCompleted || attempts[0].Token != byID[id].LeaseToken || !attempts[0].FinishedAt.Equal(*got.FinalizedAt) {
						t.Errorf("job %d: %s finalized %v with attempts %+v, want completed with one completed attempt of token %d finished then", id, got.State, got.FinalizedAt, attempts, byID[id].LeaseToken)
					}
				}
				if !withClaim {
					if claimed, err = exec.JobClaim(ctx, claimQ(10)); err != nil {
						t.Fatal(err)
					}
				}
				if len(claimed) != 1 || claimed[0].ID != child {
					t.Errorf("claimed %d jobs after the finish, want the dependent %d", len(claimed), child)
				}
			})
		}
	}
}
