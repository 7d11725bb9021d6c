package postgres

import (
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// BenchmarkPruneCompleted measures what keeping a completed job's lease in
// its row (migration 12) defers to retention: deleting 1,000 completed jobs
// whose rows hold their leases, which the delete trigger copies into the
// attempt log in the same statement ("held"), against deleting 1,000 whose
// leases already have log rows, as every completion wrote before version 12
// ("logged"). Each iteration deletes one batch of each, alternating which
// goes first, on one connection. Per job it reports the statement's time
// and, when the server runs on this machine, the server backend's CPU:
//
//	go test -run '^$' -bench PruneCompleted -benchtime 20x -count 3 ./postgres
func BenchmarkPruneCompleted(b *testing.B) {
	const batch = 1000
	ctx := b.Context()
	d := newTestDriver(b)
	exec := d.GetExecutor()
	forms := []string{"held", "logged"}
	for _, queue := range forms {
		params := make([]*driver.JobInsertParams, b.N*batch)
		for i := range params {
			params[i] = testJob(queue)
		}
		if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: params}); err != nil {
			b.Fatal(err)
		}
		for done := 0; done < len(params); {
			jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: queue, Max: batch, Owner: "w", DefaultLeaseTTL: time.Hour})
			if err != nil || len(jobs) == 0 {
				b.Fatalf("claim: %d jobs, %v", len(jobs), err)
			}
			items := make([]*driver.JobFinish, len(jobs))
			for i, j := range jobs {
				items[i] = &driver.JobFinish{ID: j.ID, Token: j.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
			}
			if _, err := exec.JobFinish(ctx, &driver.JobFinishParams{Owner: "w", Items: items}); err != nil {
				b.Fatal(err)
			}
			done += len(jobs)
		}
	}
	// Clearing the mark copies the leases into the log (the update
	// trigger): the state every completed job had before version 12.
	if _, err := d.Pool().Exec(ctx, "UPDATE leasehold_job SET completion_in_row = false WHERE queue = 'logged'"); err != nil {
		b.Fatal(err)
	}
	for _, table := range []string{"leasehold_job", "leasehold_attempt_log"} {
		if _, err := d.Pool().Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			b.Fatal(err)
		}
	}
	conn, pid, cpuOK := benchConn(b, d)
	// jobPruneSQL's statement for one queue, so that each form deletes its
	// own jobs.
	const prune = `DELETE FROM leasehold_job WHERE id IN (
	SELECT id FROM leasehold_job WHERE state = 'completed' AND queue = $1
	ORDER BY finalized_at LIMIT $2 FOR UPDATE SKIP LOCKED)`
	stmt := make([]time.Duration, len(forms))
	cpu := make([]time.Duration, len(forms))
	b.ResetTimer()
	for i := range b.N {
		for k := range forms {
			f := (i + k) % len(forms)
			cpu0, _ := backendCPU(pid)
			start := time.Now()
			tag, err := conn.Exec(ctx, prune, forms[f], batch)
			if err != nil || tag.RowsAffected() != batch {
				b.Fatalf("%s: prune: %v, %d rows; want %d", forms[f], err, tag.RowsAffected(), batch)
			}
			stmt[f] += time.Since(start)
			cpu1, _ := backendCPU(pid)
			cpu[f] += cpu1 - cpu0
		}
	}
	b.StopTimer()
	var logged int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM leasehold_attempt_log").Scan(&logged); err != nil {
		b.Fatal(err)
	}
	if want := 2 * b.N * batch; logged != want {
		b.Fatalf("attempt log rows = %d, want %d: a pruned job's lease is missing", logged, want)
	}
	jobs := float64(b.N * batch)
	for f, form := range forms {
		b.ReportMetric(float64(stmt[f].Nanoseconds())/jobs, form+"-stmt-ns/job")
		if cpuOK {
			b.ReportMetric(float64(cpu[f].Nanoseconds())/jobs, form+"-server-cpu-ns/job")
		}
	}
	b.ReportMetric(0, "ns/op")
}
