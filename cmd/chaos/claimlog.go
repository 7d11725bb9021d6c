package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// claimLog is the worker processes' record of every handler run, kept
// outside the database: a failover with asynchronous replication can roll
// back the database's own record (attempt rows, tokens), and the checker
// needs what the workers actually did to see what was lost or reused. It
// is a WorkMiddleware writing one JSON line per run start and end; each
// line is one write(2) to a file opened with O_APPEND, so a SIGKILLed
// worker loses none it wrote.
type claimLog struct {
	leasehold.MiddlewareDefaults
	mu sync.Mutex
	f  *os.File
}

var _ leasehold.WorkMiddleware = (*claimLog)(nil)

// claimEvent is one line of a claim log.
type claimEvent struct {
	Ev  string `json:"ev"` // "start" or "end"
	Job int64  `json:"job"`
	// Created is the job's created_at (Unix ns): with the ID, the job's
	// identity, since a failover with asynchronous replication can roll
	// the ID sequence back and give a lost job's ID to another job.
	Created int64  `json:"created"`
	Kind    string `json:"kind"`
	Token   int64  `json:"token"`
	Owner   string `json:"owner"`
	At      int64  `json:"at"` // Unix nanoseconds, this machine's clock
	Err     string `json:"err,omitempty"`
}

func openClaimLog(path string) (*claimLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &claimLog{f: f}, nil
}

// Work logs the run's start and end around the handler.
func (l *claimLog) Work(ctx context.Context, job *leasetype.JobRow, next func(ctx context.Context) error) error {
	created := job.CreatedAt.UnixNano()
	l.write(claimEvent{Ev: "start", Job: job.ID, Created: created, Kind: job.Kind, Token: job.LeaseToken, Owner: job.LeaseOwner, At: time.Now().UnixNano()})
	err := next(ctx)
	end := claimEvent{Ev: "end", Job: job.ID, Created: created, Kind: job.Kind, Token: job.LeaseToken, Owner: job.LeaseOwner, At: time.Now().UnixNano()}
	if err != nil {
		end.Err = err.Error()
		if end.Err == "" {
			end.Err = "error"
		}
	}
	l.write(end)
	return err
}

func (l *claimLog) write(ev claimEvent) {
	b, err := json.Marshal(ev)
	if err != nil {
		return
	}
	l.mu.Lock()
	_, _ = l.f.Write(append(b, '\n'))
	l.mu.Unlock()
}

func (l *claimLog) Close() error { return l.f.Close() }

// readClaimLogs reads every claims-*.jsonl file in dir; a torn last line
// (a worker killed mid-write) is skipped.
func readClaimLogs(dir string) ([]claimEvent, error) {
	files, err := filepath.Glob(filepath.Join(dir, "claims-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []claimEvent
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var ev claimEvent
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out = append(out, ev)
			}
		}
		f.Close()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].At < out[j].At })
	return out, nil
}

// claimFindings is what the claim logs show.
type claimFindings struct {
	// tokenReuses lists jobs whose same fencing token was granted to two
	// leases (two handler runs started under it): the lease record was
	// rolled back (async failover) and the token number granted again.
	tokenReuses []tokenReuse
	// doubleOK lists charge jobs whose handler ran to success (its fenced
	// completion committed, as far as it was told) under two different
	// leases: the first completion was acknowledged and then lost.
	doubleOK []int64
	// idsReused lists job IDs the claim logs saw on two different jobs
	// (two created_at): the ID sequence rolled back with a failover.
	idsReused []int64
	starts    []int64 // handler start times, sorted
}

type tokenReuse struct {
	Job    int64    `json:"job"`
	Token  int64    `json:"token"`
	Owners []string `json:"owners"`
}

func analyzeClaims(evs []claimEvent, chargeKind string) claimFindings {
	var cf claimFindings
	type job struct{ id, created int64 }
	type key struct {
		job   job
		token int64
	}
	owners := map[key][]string{}          // every start, owner by owner
	okLeases := map[job]map[string]bool{} // "token/owner" of each job's successful runs
	created := map[int64]map[int64]bool{} // job ID -> the created_at of the jobs seen with it
	for _, ev := range evs {
		j := job{ev.Job, ev.Created}
		k := key{j, ev.Token}
		if created[ev.Job] == nil {
			created[ev.Job] = map[int64]bool{}
		}
		created[ev.Job][ev.Created] = true
		switch ev.Ev {
		case "start":
			cf.starts = append(cf.starts, ev.At)
			owners[k] = append(owners[k], ev.Owner)
		case "end":
			if ev.Err == "" && ev.Kind == chargeKind {
				if okLeases[j] == nil {
					okLeases[j] = map[string]bool{}
				}
				okLeases[j][fmt.Sprintf("%d/%s", ev.Token, ev.Owner)] = true
			}
		}
	}
	// A token is granted once per job: two runs starting under the same
	// one, by two owners or twice by one, are two leases with one token.
	for k, o := range owners {
		if len(o) > 1 {
			cf.tokenReuses = append(cf.tokenReuses, tokenReuse{Job: k.job.id, Token: k.token, Owners: o})
		}
	}
	sort.Slice(cf.tokenReuses, func(i, j int) bool { return cf.tokenReuses[i].Job < cf.tokenReuses[j].Job })
	for j, leases := range okLeases {
		if len(leases) > 1 {
			cf.doubleOK = append(cf.doubleOK, j.id)
		}
	}
	sort.Slice(cf.doubleOK, func(i, j int) bool { return cf.doubleOK[i] < cf.doubleOK[j] })
	for id, c := range created {
		if len(c) > 1 {
			cf.idsReused = append(cf.idsReused, id)
		}
	}
	sort.Slice(cf.idsReused, func(i, j int) bool { return cf.idsReused[i] < cf.idsReused[j] })
	return cf
}

// lostRun is a handler run of a job the cluster no longer has (lost with
// an async failover) that ended after the failover: its outcome write went
// to the new primary, fenced by (job ID, token) only, which may name
// another job there (the ID sequence and the token rolled back alike).
type lostRun struct {
	Job   int64  `json:"job"`
	Token int64  `json:"token"`
	Owner string `json:"owner"`
	// OK is true when the handler, and so its fenced completion, succeeded:
	// the completion landed on the new primary's job with that ID.
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
}

// lostRuns returns the runs of jobs absent from the database (identities:
// job ID -> created_at in Unix ns) that ended after the time after.
func lostRuns(evs []claimEvent, identities map[int64]int64, after int64) []lostRun {
	var out []lostRun
	for _, ev := range evs {
		if ev.Ev != "end" || ev.At <= after {
			continue
		}
		if created, ok := identities[ev.Job]; ok && created == ev.Created {
			continue
		}
		out = append(out, lostRun{Job: ev.Job, Token: ev.Token, Owner: ev.Owner, OK: ev.Err == "", Err: ev.Err})
	}
	return out
}

// jobIdentities returns every job's created_at (Unix ns) by ID.
func jobIdentities(ctx context.Context, db *sql.DB) (map[int64]int64, error) {
	rows, err := db.QueryContext(ctx, `SELECT id, created_at FROM leasehold_job`)
	if err != nil {
		return nil, fmt.Errorf("read job identities: %w", err)
	}
	defer rows.Close()
	out := map[int64]int64{}
	for rows.Next() {
		var id int64
		var created time.Time
		if err := rows.Scan(&id, &created); err != nil {
			return nil, err
		}
		out[id] = created.UnixNano()
	}
	return out, rows.Err()
}

// attemptRow is one row of the attempt history, with its job's created_at.
type attemptRow struct {
	Job     int64  `json:"job"`
	Token   int64  `json:"token"`
	Owner   string `json:"owner"`
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	created int64
}

func readAttempts(ctx context.Context, db *sql.DB) ([]attemptRow, error) {
	rows, err := db.QueryContext(ctx, `SELECT a.job_id, a.token, a.owner, a.outcome, COALESCE(a.error, ''), j.created_at
		FROM leasehold_attempt a JOIN leasehold_job j ON j.id = a.job_id`)
	if err != nil {
		return nil, fmt.Errorf("read attempts: %w", err)
	}
	defer rows.Close()
	var out []attemptRow
	for rows.Next() {
		var a attemptRow
		var created time.Time
		if err := rows.Scan(&a.Job, &a.Token, &a.Owner, &a.Outcome, &a.Error, &created); err != nil {
			return nil, err
		}
		a.created = created.UnixNano()
		out = append(out, a)
	}
	return out, rows.Err()
}

// foreignOutcomes returns the attempt rows written by a lease of another
// job: the claim logs show that owner starting that job ID under that
// token, but for a job created at another time (one lost with a failover),
// and never for the job the row belongs to. The lease of a lost job ended,
// fenced by (ID, token) alone, the new job that took its ID.
func foreignOutcomes(evs []claimEvent, attempts []attemptRow) []attemptRow {
	type lease struct {
		job, token int64
		owner      string
	}
	created := map[lease]map[int64]bool{}
	for _, ev := range evs {
		if ev.Ev != "start" {
			continue
		}
		l := lease{ev.Job, ev.Token, ev.Owner}
		if created[l] == nil {
			created[l] = map[int64]bool{}
		}
		created[l][ev.Created] = true
	}
	var out []attemptRow
	for _, a := range attempts {
		c := created[lease{a.Job, a.Token, a.Owner}]
		if len(c) > 0 && !c[a.created] {
			out = append(out, a)
		}
	}
	return out
}
