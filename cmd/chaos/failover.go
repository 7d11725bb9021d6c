package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"
)

// failoverRecord is one failover the harness caused.
type failoverRecord struct {
	Kind string `json:"kind"`
	From string `json:"from"`         // the primary failed over
	To   string `json:"to,omitempty"` // the new primary
	At   int64  `json:"at_unix_ms"`   // when the fault began: the switchover asked, the freeze or the kill
	// LeaderMS is the time from the fault to a new leader on Patroni's REST
	// API; HealthyMS to the cluster whole again (the old primary rejoined
	// as a streaming replica).
	LeaderMS  int64 `json:"leader_ms"`
	HealthyMS int64 `json:"healthy_ms"`
	// WriteOutageMS is the longest stretch without a successful payment
	// creation (an INSERT of the payment and its job, committed) from the
	// fault on; FirstInsertMS the time from the fault to the first
	// creation begun and committed after it (for a freeze, after the kill:
	// during the freeze itself writes may still land); ClaimOutageMS the longest
	// stretch without a handler run starting (a claim). -1: none after it.
	WriteOutageMS int64 `json:"write_outage_ms"`
	FirstInsertMS int64 `json:"first_insert_ms"`
	ClaimOutageMS int64 `json:"claim_outage_ms"`
	// Receivers is how many walreceivers a freeze stopped.
	Receivers int    `json:"walreceivers_frozen,omitempty"`
	Error     string `json:"error,omitempty"`

	at     time.Time
	killAt time.Time // a freeze's kill, from which its FirstInsertMS counts
}

// haReport is the failover part of a run's report.
type haReport struct {
	Mode      string           `json:"mode"`  // sync or async replication
	Route     string           `json:"route"` // haproxy or multihost
	Fault     string           `json:"fault"`
	Failovers []failoverRecord `json:"failovers"`
	// The worst of the failovers.
	WriteOutageMS int64 `json:"write_outage_ms"`
	FirstInsertMS int64 `json:"first_insert_ms"`
	ClaimOutageMS int64 `json:"claim_outage_ms"`
	// LostAcked lists the payments whose creation was acknowledged and
	// which the cluster no longer has: lost with the old primary's
	// unreplicated WAL. Allowed with async replication only.
	LostAcked []string `json:"lost_acked"`
	// OrphanCharges lists payments charged at the PSP by a worker of the old
	// primary and then lost with it: money taken with no record. Allowed
	// (and to be reconciled from the PSP's side) with async replication only.
	OrphanCharges []string `json:"orphan_charges"`
	// CompletionsLost lists charge jobs whose handler succeeded (its fenced
	// completion acknowledged) under two leases: the first completion was
	// lost and the job ran again (the PSP's idempotency key kept the charge
	// single). Allowed with async replication only.
	CompletionsLost []int64 `json:"completions_lost"`
	// TokenReuses lists jobs whose fencing token was granted twice, to two
	// owners: the lease record rolled back with the failover. Known with
	// async replication; a stale write under a reused token would land.
	TokenReuses []tokenReuse `json:"token_reuses"`
	// JobIDsReused lists job IDs given to two different jobs (the claim
	// logs saw two created_at): the ID sequence rolled back with the lost
	// WAL, and a new job took a lost job's ID. Known with async
	// replication; anything outside the database that kept a lost job's
	// ID now points at another job.
	JobIDsReused []int64 `json:"job_ids_reused"`
	// LostRuns lists handler runs of lost jobs that ended after the kill,
	// so wrote their outcome to the new primary; ForeignCompletions counts
	// those whose completion succeeded there: it completed whichever job
	// the new primary holds under that ID and token. Must be 0.
	LostRuns           []lostRun `json:"lost_runs"`
	ForeignCompletions int       `json:"foreign_completions"`
	// ForeignOutcomes lists attempt rows in the database written by the
	// lease of a lost job onto the job that took its ID, with the same
	// token: the fencing let a stale lease end another job. Must be empty.
	ForeignOutcomes []attemptRow `json:"foreign_outcomes"`
	// Doubled counts side effects done twice without the fencing refusing
	// one: duplicate PSP ledger rows, double captures, jobs completed by two
	// leases in the database, stale settlements that landed, and, with
	// sync replication, CompletionsLost. Must be 0.
	Doubled int64 `json:"doubled"`
	// Fenced counts the writes the fencing refused (the library's count
	// and the charge recordings rolled back).
	Fenced int64 `json:"fenced"`
}

// runFailovers injects cfg.failovers failovers of the fault kinds in turn:
// the first a quarter into the fault phase, each next one once the cluster
// is whole again and faultEvery has passed.
func (in *injector) runFailovers(ctx context.Context, start, until time.Time) {
	sleepCtx(ctx, time.Until(start.Add(max(in.cfg.duration/4, in.cfg.faultEvery+time.Second))))
	for n := 0; n < in.cfg.failovers && ctx.Err() == nil && time.Now().Before(until); n++ {
		kind := in.cfg.faults[n%len(in.cfg.faults)]
		rec := in.failover(ctx, kind)
		if rec.Error != "" {
			in.errors.Add(1)
			in.logf("failover %s: %s", kind, rec.Error)
		}
		in.mu.Lock()
		in.failovers = append(in.failovers, rec)
		in.mu.Unlock()
		sleepCtx(ctx, in.cfg.faultEvery)
	}
}

func (in *injector) failover(ctx context.Context, kind string) failoverRecord {
	c := in.ha
	rec := failoverRecord{Kind: kind}
	l := c.leader(ctx)
	if l < 0 {
		var err error
		if l, err = c.waitLeader(ctx, -1, 30*time.Second); err != nil {
			rec.Error = "before the fault: " + err.Error()
			return rec
		}
	}
	rec.From = c.nodes[l].name
	_ = in.tracker.snapshot(ctx, kind, "")
	var faultErr error
	switch kind {
	case faultSwitchover:
		rec.at = time.Now()
		in.logf("fault: patronictl switchover away from %s", rec.From)
		faultErr = c.switchover(ctx, l)
	case faultKillPrimary:
		rec.at = time.Now()
		in.logf("fault: SIGKILL %s's Patroni and Postgres", rec.From)
		faultErr = c.killNode(l)
	case faultFreeze:
		recv, err := c.walReceivers(ctx, l)
		if err != nil {
			rec.Error = err.Error()
			return rec
		}
		rec.at = time.Now()
		for _, pid := range recv {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err == nil {
				rec.Receivers++
			}
		}
		in.logf("fault: %d walreceivers stopped; writing for %s, then SIGKILL %s", rec.Receivers, in.cfg.freeze, rec.From)
		sleepCtx(context.WithoutCancel(ctx), in.cfg.freeze)
		rec.killAt = time.Now()
		faultErr = c.killNode(l)
		// The WAL the old primary sent while the replicas were frozen
		// still sits in their sockets' receive buffers; a partition would
		// have lost it. Killing the frozen walreceivers drops it (each
		// replica's postmaster then restarts its processes, and recovery
		// continues from what the replica had written).
		for _, pid := range recv {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	rec.At = rec.at.UnixMilli()
	if faultErr != nil {
		rec.Error = faultErr.Error()
	}
	to, err := c.waitLeader(ctx, l, 60*time.Second)
	rec.LeaderMS = time.Since(rec.at).Milliseconds()
	if err != nil {
		rec.Error = joinErr(rec.Error, err.Error())
		return rec
	}
	rec.To = c.nodes[to].name
	in.logf("failover: %s is the leader after %d ms", rec.To, rec.LeaderMS)
	if kind != faultSwitchover {
		if err := c.startNode(ctx, l); err != nil {
			rec.Error = joinErr(rec.Error, err.Error())
		}
	}
	if err := c.waitHealthy(ctx, 90*time.Second); err != nil {
		rec.Error = joinErr(rec.Error, err.Error())
	}
	rec.HealthyMS = time.Since(rec.at).Milliseconds()
	in.logf("failover: cluster whole again after %d ms", rec.HealthyMS)
	return rec
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// outages fills in each failover's outages from the feeder's commit times
// and the workers' handler start times.
func outages(recs []failoverRecord, okAt [][2]int64, starts []int64) {
	for i := range recs {
		r := &recs[i]
		if r.at.IsZero() {
			continue
		}
		t := r.at.UnixNano()
		first := t
		if !r.killAt.IsZero() {
			first = r.killAt.UnixNano()
		}
		end := t + int64(2*time.Minute)
		if i+1 < len(recs) && !recs[i+1].at.IsZero() {
			end = recs[i+1].at.UnixNano()
		}
		var ends []int64
		r.FirstInsertMS = -1
		for _, ok := range okAt {
			ends = append(ends, ok[1])
			if ok[0] > first && ok[1] < end && (r.FirstInsertMS < 0 || ok[1]-first < r.FirstInsertMS*int64(time.Millisecond)) {
				r.FirstInsertMS = (ok[1] - first) / int64(time.Millisecond)
			}
		}
		sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
		r.WriteOutageMS = longestGap(ends, t, end)
		r.ClaimOutageMS = longestGap(starts, t, end)
	}
}

// longestGap returns the longest stretch in [t, end) with no event of the
// sorted times, counted from t; -1 when no event follows t before end.
func longestGap(times []int64, t, end int64) int64 {
	prev := t
	var gap int64
	after := false
	for _, x := range times {
		if x <= t {
			continue
		}
		if x >= end {
			break
		}
		after = true
		gap = max(gap, x-prev)
		prev = x
	}
	if !after {
		return -1
	}
	return gap / int64(time.Millisecond)
}

// haCheck completes the report of a run against a Patroni cluster.
func haCheck(e *env, r *Report, in *injector, cf claimFindings, runs func(after int64) []lostRun, foreign []attemptRow, lostAcked, orphans []string, okAt [][2]int64) {
	cfg := e.cfg
	h := &haReport{Mode: e.ha.mode, Route: cfg.haRoute, Fault: strings.Join(cfg.faults, ","),
		LostAcked: lostAcked, OrphanCharges: orphans, CompletionsLost: cf.doubleOK, TokenReuses: cf.tokenReuses, JobIDsReused: cf.idsReused}
	if h.LostAcked == nil {
		h.LostAcked = []string{}
	}
	if h.OrphanCharges == nil {
		h.OrphanCharges = []string{}
	}
	if h.CompletionsLost == nil {
		h.CompletionsLost = []int64{}
	}
	if h.TokenReuses == nil {
		h.TokenReuses = []tokenReuse{}
	}
	if h.JobIDsReused == nil {
		h.JobIDsReused = []int64{}
	}
	in.mu.Lock()
	h.Failovers = append([]failoverRecord(nil), in.failovers...)
	in.mu.Unlock()
	outages(h.Failovers, okAt, cf.starts)
	// The first moment the old primary could no longer take a write.
	var dead int64
	for _, f := range h.Failovers {
		at := f.at
		if !f.killAt.IsZero() {
			at = f.killAt
		}
		if f.Kind != faultSwitchover && !at.IsZero() && (dead == 0 || at.UnixNano() < dead) {
			dead = at.UnixNano()
		}
	}
	h.LostRuns = []lostRun{}
	if dead != 0 {
		h.LostRuns = append(h.LostRuns, runs(dead)...)
	}
	h.ForeignOutcomes = foreign
	if h.ForeignOutcomes == nil {
		h.ForeignOutcomes = []attemptRow{}
	}
	for _, a := range h.ForeignOutcomes {
		r.problem("job %d's attempt (token %d, owner %s, outcome %s, error %q) was written by the lease of a lost job with the same ID and token", a.Job, a.Token, a.Owner, a.Outcome, a.Error)
	}
	for _, lr := range h.LostRuns {
		if lr.OK {
			h.ForeignCompletions++
			r.problem("job %d (token %d, %s) was lost with the old primary, and its completion after the failover succeeded on the new primary's job %d", lr.Job, lr.Token, lr.Owner, lr.Job)
		}
	}
	h.FirstInsertMS, h.WriteOutageMS, h.ClaimOutageMS = -1, -1, -1
	for i, f := range h.Failovers {
		if i == 0 {
			h.FirstInsertMS, h.WriteOutageMS, h.ClaimOutageMS = f.FirstInsertMS, f.WriteOutageMS, f.ClaimOutageMS
		}
		h.FirstInsertMS = worst(h.FirstInsertMS, f.FirstInsertMS)
		h.WriteOutageMS = worst(h.WriteOutageMS, f.WriteOutageMS)
		h.ClaimOutageMS = worst(h.ClaimOutageMS, f.ClaimOutageMS)
		if f.Error != "" {
			r.problem("failover %d (%s from %s): %s", i+1, f.Kind, f.From, f.Error)
		}
		if f.WriteOutageMS < 0 {
			r.problem("failover %d: no payment created after it", i+1)
		}
	}
	if len(h.Failovers) < cfg.failovers {
		r.problem("%d failovers injected of %d", len(h.Failovers), cfg.failovers)
	}
	h.Doubled = r.DuplicateEffects + r.DoubleCharges + r.StaleWrites + int64(h.ForeignCompletions) + int64(len(h.ForeignOutcomes))
	h.Fenced = r.FencedWrites + r.FencedCompletions
	async := h.Mode == "async"
	if !async {
		h.Doubled += int64(len(h.CompletionsLost))
		for _, job := range h.CompletionsLost {
			r.problem("charge job %d succeeded under two leases with sync replication", job)
		}
		for _, t := range h.TokenReuses {
			r.problem("job %d: token %d granted to %s with sync replication", t.Job, t.Token, strings.Join(t.Owners, " and "))
		}
		for _, id := range h.JobIDsReused {
			r.problem("job ID %d given to two jobs with sync replication", id)
		}
		for _, id := range h.LostAcked {
			r.problem("%s acknowledged but missing after the failover with sync replication", id)
		}
		for _, id := range h.OrphanCharges {
			r.problem("the PSP charged %s, which the cluster no longer has, with sync replication", id)
		}
	}
	r.HA = h
	r.finish()
	errs := 0
	for _, f := range h.Failovers {
		if f.Error != "" || f.WriteOutageMS < 0 {
			errs++
		}
	}
	r.OK = r.OK && errs == 0 && len(h.Failovers) >= cfg.failovers && h.ForeignCompletions == 0 && len(h.ForeignOutcomes) == 0 &&
		(async || (len(h.LostAcked) == 0 && len(h.OrphanCharges) == 0 && len(h.CompletionsLost) == 0 && len(h.TokenReuses) == 0 && len(h.JobIDsReused) == 0))
}

func worst(a, b int64) int64 {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// writeHALine writes a failover run's one-line summary.
func (r *Report) writeHALine(w interface{ Write([]byte) (int, error) }) {
	h := r.HA
	verdict := "OK"
	if !r.OK {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "failover %s: %s %s via %s, %d failovers: write outage %d ms (first insert %d ms, claims %d ms), acked %d, lost %d %v, orphan charges %d, completions lost %d, token reuses %d, job IDs reused %d, lost runs %d (foreign completions %d), foreign outcomes %d, doubled %d, fenced %d, stale %d, not terminal %d, elapsed %.1fs\n",
		verdict, h.Mode, h.Fault, h.Route, len(h.Failovers), h.WriteOutageMS, h.FirstInsertMS, h.ClaimOutageMS,
		r.Acknowledged, len(h.LostAcked), h.LostAcked, len(h.OrphanCharges), len(h.CompletionsLost), len(h.TokenReuses), len(h.JobIDsReused),
		len(h.LostRuns), h.ForeignCompletions, len(h.ForeignOutcomes), h.Doubled, h.Fenced, r.StaleWrites, r.NotTerminal, float64(r.ElapsedMS)/1000)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
}
