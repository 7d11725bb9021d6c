package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/leasehold/leasehold/examples/payments"
)

// Report is the outcome of a run: what the checker found in the database
// and the PSP's ledger, and what the harness did.
type Report struct {
	Backend    string `json:"backend"`
	Seed       int64  `json:"seed"`
	Workers    int    `json:"workers"`
	LeaseTTLMS int64  `json:"lease_ttl_ms"`

	// Payments is how many payments the run set out to create; Acknowledged
	// how many creations were acknowledged; NotCreated how many were given
	// up on (the database kept failing), never acknowledged.
	Payments     int   `json:"payments"`
	Acknowledged int   `json:"acknowledged"`
	NotCreated   int64 `json:"not_created"`

	// Jobs counts the charge jobs in the database; Completed those
	// completed; NotTerminal those not completed, discarded or cancelled
	// after the drain. Must be 0.
	Jobs        int64 `json:"jobs"`
	Completed   int64 `json:"completed"`
	NotTerminal int64 `json:"not_terminal"`

	// Succeeded, Failed and Pending split the payments by status. Pending must be 0.
	Succeeded int64 `json:"succeeded"`
	Failed    int64 `json:"failed"`
	Pending   int64 `json:"pending"`

	// Lost counts acknowledged payments missing from the database or never
	// settled, and payments whose status disagrees with the PSP's ledger
	// (charged but not recorded succeeded, or the reverse). Must be 0.
	Lost int64 `json:"lost"`
	// DuplicateEffects counts payments with more than one PSP ledger row
	// and charge jobs completed by more than one lease. Must be 0.
	DuplicateEffects int64 `json:"duplicate_effects"`
	// DoubleCharges counts payments the PSP captured more than once. Must be 0.
	DoubleCharges int64 `json:"double_charges"`
	// StaleWrites counts payments settled by a worker under a fencing token
	// other than the one that completed the job: a write from a lost lease
	// that landed. Must be 0.
	StaleWrites int64 `json:"stale_writes"`
	// PSPCharges counts successful charges in the PSP's ledger.
	PSPCharges int64 `json:"psp_charges"`

	// FencedWrites counts writes refused by the fencing token, summed over
	// the workers' last reports; FencedAfterWake those of workers woken
	// from SIGSTOP, within 2 s of waking; FencedCompletions the charge
	// recordings rolled back because the lease was lost.
	FencedWrites      int64 `json:"fenced_writes"`
	FencedAfterWake   int64 `json:"fenced_after_wake"`
	FencedCompletions int64 `json:"fenced_completions"`
	LeasesLost        int64 `json:"leases_lost"`
	LeaseExpiries     int64 `json:"lease_expiries"`
	// Reconciled counts stuck charge jobs resolved by reconciliation.
	Reconciled          int64 `json:"reconciled"`
	SettledByReconciler int64 `json:"settled_by_reconciler"`

	// LeaseGrants counts the leases granted on charge jobs (the sum of
	// their fencing tokens); AttemptsRecorded the attempt-history rows of
	// charge jobs, which must equal it once every job is terminal (every
	// lease ends in exactly one row); AttemptsMissing is the difference.
	// ClaimsLogged is the claims the workers reported (every job kind; a
	// killed worker's last 200 ms are not reported).
	LeaseGrants      int64 `json:"lease_grants"`
	AttemptsRecorded int64 `json:"attempts_recorded"`
	AttemptsMissing  int64 `json:"attempts_missing"`
	ClaimsLogged     int64 `json:"claims_logged"`

	// The faults injected.
	Kills        int64 `json:"kills"`
	Pauses       int64 `json:"pauses"`
	DBRestarts   int64 `json:"db_restarts"`
	NetFaults    int64 `json:"net_faults"`
	NetLatency   int64 `json:"net_latency"`
	NetReset     int64 `json:"net_reset"`
	NetBlackhole int64 `json:"net_blackhole"`
	FaultErrors  int64 `json:"fault_errors"`

	// MaxRecoveryMS is the longest time from a fault to a job it
	// interrupted running again (claimed under a newer token, or finished);
	// per fault kind in RecoveryMSByFault. Unrecovered counts interrupted
	// jobs that never ran again. Must be 0.
	MaxRecoveryMS     int64            `json:"max_recovery_ms"`
	RecoveryMSByFault map[string]int64 `json:"recovery_ms_by_fault"`
	JobsInterrupted   int              `json:"jobs_interrupted"`
	Unrecovered       int              `json:"unrecovered"`

	// WorkerProcesses counts the worker processes started, restarts included.
	WorkerProcesses int `json:"worker_processes"`
	// Integrity is SQLite's PRAGMA integrity_check at the end; must be "ok".
	Integrity string `json:"integrity,omitempty"`

	// The PSP's injected behaviour.
	PSPErrors     int64 `json:"psp_errors"`
	LostResponses int64 `json:"psp_lost_responses"`
	SlowResponses int64 `json:"psp_slow_responses"`
	Replays       int64 `json:"psp_replays"`

	ElapsedMS int64 `json:"elapsed_ms"`
	DrainMS   int64 `json:"drain_ms"`
	Drained   bool  `json:"drained"`
	// OK is true when nothing was lost, doubled, stale or left unfinished.
	OK       bool     `json:"ok"`
	Problems []string `json:"problems,omitempty"`

	// HA is the failover part of a run against a Patroni cluster (--ha-state).
	HA *haReport `json:"ha,omitempty"`

	// Against a Patroni cluster, what a failover may have lost, judged
	// by haCheck instead of counted as Lost.
	lostAcked, orphanCharges []string
}

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < 20 {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

func (r *Report) finish() {
	r.OK = r.Lost == 0 && r.DuplicateEffects == 0 && r.DoubleCharges == 0 && r.StaleWrites == 0 &&
		r.NotTerminal == 0 && r.Pending == 0 && r.AttemptsMissing == 0 && r.Unrecovered == 0 && r.Drained &&
		(r.Integrity == "" || r.Integrity == "ok")
}

// check reads the database and the PSP's ledger.
func check(ctx context.Context, e *env, f *feeder, fl *fleet, in *injector, tr *recoveryTracker) (*Report, error) {
	cfg := e.cfg
	r := &Report{Backend: cfg.backend, Seed: cfg.seed, Workers: cfg.workers, LeaseTTLMS: cfg.ttl.Milliseconds(),
		Payments: len(f.ids), Acknowledged: f.ackedCount(), NotCreated: f.failed.Load()}
	db := e.sqlDB

	// Charge jobs by state, and their leases.
	rows, err := db.QueryContext(ctx, `SELECT state, COUNT(*), COALESCE(SUM(lease_token), 0) FROM leasehold_job WHERE kind = '`+payments.ChargeKind+`' GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	for rows.Next() {
		var state string
		var n, grants int64
		if err := rows.Scan(&state, &n, &grants); err != nil {
			rows.Close()
			return nil, err
		}
		r.Jobs += n
		r.LeaseGrants += grants
		switch state {
		case "completed":
			r.Completed += n
		case "discarded", "cancelled":
		default:
			r.NotTerminal += n
			r.problem("%d charge jobs %s at the end", n, state)
		}
	}
	rows.Close()
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM leasehold_attempt a JOIN leasehold_job j ON j.id = a.job_id WHERE j.kind = '`+payments.ChargeKind+`'`).Scan(&r.AttemptsRecorded); err != nil {
		return nil, fmt.Errorf("count attempts: %w", err)
	}
	r.AttemptsMissing = r.LeaseGrants - r.AttemptsRecorded
	if r.AttemptsMissing != 0 {
		r.problem("%d leases granted on charge jobs but %d attempt rows recorded", r.LeaseGrants, r.AttemptsRecorded)
	}

	// The completing lease of every charge job.
	completedBy := map[int64]int64{} // job ID -> token of its completed attempt
	rows, err = db.QueryContext(ctx, `SELECT a.job_id, a.token FROM leasehold_attempt a JOIN leasehold_job j ON j.id = a.job_id
		WHERE j.kind = '`+payments.ChargeKind+`' AND a.outcome = 'completed'`)
	if err != nil {
		return nil, fmt.Errorf("read completions: %w", err)
	}
	for rows.Next() {
		var job, token int64
		if err := rows.Scan(&job, &token); err != nil {
			rows.Close()
			return nil, err
		}
		if prev, ok := completedBy[job]; ok {
			r.DuplicateEffects++
			r.problem("charge job %d completed by two leases (tokens %d and %d)", job, prev, token)
		}
		completedBy[job] = token
	}
	rows.Close()

	// Every payment against the PSP's ledger.
	ledgerRows := map[string]int{}
	for _, c := range e.psp.Ledger() {
		ledgerRows[c.Reference]++
	}
	seen := map[string]bool{}
	rows, err = db.QueryContext(ctx, `SELECT id, status, COALESCE(settled_by, ''), settled_token, charge_job_id FROM payments`)
	if err != nil {
		return nil, fmt.Errorf("read payments: %w", err)
	}
	for rows.Next() {
		var id, status, settledBy string
		var token, jobID int64
		if err := rows.Scan(&id, &status, &settledBy, &token, &jobID); err != nil {
			rows.Close()
			return nil, err
		}
		seen[id] = true
		captured := e.psp.CapturedFor(id)
		r.PSPCharges += int64(captured)
		if captured > 1 {
			r.DoubleCharges++
			r.problem("%s captured %d times by the PSP", id, captured)
		}
		if n := ledgerRows[id]; n > 1 {
			r.DuplicateEffects++
			r.problem("%s has %d PSP ledger rows", id, n)
		}
		switch payments.Status(status) {
		case payments.StatusSucceeded:
			r.Succeeded++
			if captured == 0 {
				r.Lost++
				r.problem("%s recorded succeeded but the PSP never charged it", id)
			}
		case payments.StatusFailed:
			r.Failed++
			if captured > 0 {
				r.Lost++
				r.problem("%s recorded failed but the PSP charged it", id)
			}
		default:
			r.Pending++
			r.Lost++
			r.problem("%s still pending (PSP charges: %d)", id, captured)
		}
		switch settledBy {
		case payments.SettledByReconciler:
			r.SettledByReconciler++
		case payments.SettledByWorker:
			if t, ok := completedBy[jobID]; !ok || t != token {
				r.StaleWrites++
				r.problem("%s settled by a worker under token %d; job %d was completed by token %d", id, token, jobID, t)
			}
		}
	}
	rows.Close()
	for i, id := range f.ids {
		if f.acked[i].Load() && !seen[id] {
			if e.ha != nil {
				r.lostAcked = append(r.lostAcked, id)
				continue
			}
			r.Lost++
			r.problem("%s acknowledged but missing from the payments table", id)
		}
	}
	for ref, n := range ledgerRows {
		if !seen[ref] {
			if e.ha != nil {
				r.orphanCharges = append(r.orphanCharges, ref)
				continue
			}
			r.Lost++
			r.problem("the PSP holds %d charges for %s, which is not in the payments table", n, ref)
		}
	}

	if cfg.backend == "sqlite" {
		r.Integrity, err = integrityCheck(ctx, e)
		if err != nil {
			return nil, err
		}
		if r.Integrity != "ok" {
			r.problem("integrity_check: %s", r.Integrity)
		}
	}

	// The workers' counters, from each process's last report.
	for _, p := range fl.every() {
		rep := p.lastReport()
		r.FencedWrites += rep.Stats.FencedWrites
		r.LeasesLost += rep.Stats.LeasesLost
		r.LeaseExpiries += rep.Stats.Expired
		r.ClaimsLogged += rep.Stats.Claimed
		r.FencedCompletions += rep.Charge.Fenced
		r.Reconciled += rep.Reconcile.ResolvedSucceeded + rep.Reconcile.ResolvedFailed + rep.Reconcile.ResolvedRetry
	}
	r.WorkerProcesses = len(fl.every())
	r.FencedAfterWake = in.fencedAfterWake.Load()
	r.Kills, r.Pauses, r.DBRestarts = in.kills.Load(), in.pauses.Load(), in.dbRestarts.Load()
	r.NetLatency, r.NetReset, r.NetBlackhole = in.netLatency.Load(), in.netReset.Load(), in.netBlackhole.Load()
	r.NetFaults = in.netFaults()
	r.FaultErrors = in.errors.Load()
	maxRec, by, unrecovered, tracked := tr.result()
	r.MaxRecoveryMS, r.RecoveryMSByFault, r.Unrecovered, r.JobsInterrupted = maxRec.Milliseconds(), by, unrecovered, tracked
	if unrecovered > 0 {
		r.problem("%d jobs interrupted by a fault never ran again", unrecovered)
	}
	st := e.psp.Stats()
	r.PSPErrors, r.LostResponses, r.SlowResponses, r.Replays = st.InjectedErrors, st.LostResponses, st.SlowResponses, st.Replays
	return r, nil
}

// integrityCheck runs PRAGMA integrity_check on the SQLite database.
func integrityCheck(ctx context.Context, e *env) (string, error) {
	rows, err := e.sqlDB.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return "", fmt.Errorf("integrity_check: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return "", err
		}
		out = append(out, s)
	}
	return strings.Join(out, "; "), rows.Err()
}

// writeTable writes the report for a person.
func (r *Report) writeTable(w io.Writer) {
	verdict := "OK"
	if !r.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "chaos %s: %s, seed %d, %d workers, lease %d ms\n", verdict, r.Backend, r.Seed, r.Workers, r.LeaseTTLMS)
	fmt.Fprintf(w, "  payments %d (acknowledged %d, not created %d): succeeded %d, failed %d, pending %d\n",
		r.Payments, r.Acknowledged, r.NotCreated, r.Succeeded, r.Failed, r.Pending)
	fmt.Fprintf(w, "  charge jobs %d: completed %d, not terminal %d\n", r.Jobs, r.Completed, r.NotTerminal)
	fmt.Fprintf(w, "  lost %d, duplicate effects %d, double charges %d, stale writes %d\n", r.Lost, r.DuplicateEffects, r.DoubleCharges, r.StaleWrites)
	fmt.Fprintf(w, "  fenced writes %d (%d after waking, %d charge recordings rolled back), lease expiries %d, reconciled %d\n",
		r.FencedWrites, r.FencedAfterWake, r.FencedCompletions, r.LeaseExpiries, r.Reconciled)
	fmt.Fprintf(w, "  leases granted %d, attempts recorded %d, claims logged %d\n", r.LeaseGrants, r.AttemptsRecorded, r.ClaimsLogged)
	fmt.Fprintf(w, "  faults: kills %d, pauses %d, db restarts %d, net faults %d (latency %d, reset %d, blackhole %d), errors %d\n",
		r.Kills, r.Pauses, r.DBRestarts, r.NetFaults, r.NetLatency, r.NetReset, r.NetBlackhole, r.FaultErrors)
	fmt.Fprintf(w, "  max recovery %d ms over %d interrupted jobs %v\n", r.MaxRecoveryMS, r.JobsInterrupted, r.RecoveryMSByFault)
	if r.Integrity != "" {
		fmt.Fprintf(w, "  integrity_check %s\n", r.Integrity)
	}
	fmt.Fprintf(w, "  elapsed %.1fs (drain %.1fs)\n", float64(r.ElapsedMS)/1000, float64(r.DrainMS)/1000)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}
