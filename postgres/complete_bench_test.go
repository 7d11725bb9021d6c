package postgres

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
)

// BenchmarkCompleteOne measures the completion of one lease in a caller's
// transaction with its bound, as CompleteTx sends it (the one-lease
// statement, jobCompleteOneSQL), against the form before it
// (clock-cte: the clock a materialized CTE that also made the settings),
// against the batch statement given a batch of one (jobCompleteSQL) and
// the bound's earlier form (a row per setting, filtered and counted), and
// counts what the guarantees cost: the statement without the bound (and
// the form before it without the bound, clock-cte-unbounded), the
// form of schema version 11 that also inserted an attempt row (the job row
// holds it since version 12), and a bare update of the job row (fenced on
// token and lease only). Each iteration runs one transaction (BEGIN, the
// completion, COMMIT) of every form in turn on one connection, so that the
// machine's drift falls on all of them alike, in a random order.
// Per form it reports the statement's time from call to return and, when
// the server runs on this machine and its /proc is readable, the server
// backend's CPU per transaction (/proc/PID/schedstat, in nanoseconds):
//
//	go test -run '^$' -bench CompleteOne -benchtime 3000x -count 3 ./postgres
func BenchmarkCompleteOne(b *testing.B) {
	forms := []struct {
		name string
		sql  string
		args func(id, token int64) []any
	}{
		{"one-lease", boundedFinishSQL[jobCompleteOneSQL], func(id, token int64) []any {
			return []any{id, token, "w", int64(30000)}
		}},
		{"clock-cte", boundedFinish(completeOneClockSQL, 4), func(id, token int64) []any {
			return []any{id, token, "w", int64(30000)}
		}},
		{"batch-of-one", boundedFinishSQL[jobCompleteSQL], func(id, token int64) []any {
			return []any{[]int64{id}, []int64{token}, "w", int64(30000)}
		}},
		{"bound-as-rows", completeOneRowsBoundSQL, func(id, token int64) []any {
			return []any{id, token, "w", int64(30000)}
		}},
		{"unbounded", jobCompleteOneSQL, func(id, token int64) []any { return []any{id, token, "w"} }},
		{"clock-cte-unbounded", completeOneClockSQL, func(id, token int64) []any { return []any{id, token, "w"} }},
		{"attempt-row", completeOneAttemptRowSQL, func(id, token int64) []any { return []any{id, token, "w"} }},
		{"bare-update", `UPDATE leasehold_job SET state = 'completed', finalized_at = now()
			WHERE id = $1 AND lease_token = $2 AND state = 'running' AND lease_until > now() RETURNING id`,
			func(id, token int64) []any { return []any{id, token} }},
	}
	ctx := b.Context()
	d := newTestDriver(b)
	leases := claimForBench(b, d, b.N*len(forms))
	conn, pid, cpuOK := benchConn(b, d)
	stmt := make([]time.Duration, len(forms))
	cpu := make([]time.Duration, len(forms))
	// Each iteration runs the forms in a new random order, so that none
	// always runs first or after the same form: in a fixed order the first
	// one measured about 12 µs more, and in a rotated one (each form always
	// after the same one) two forms that differ by one setting measured
	// 11–13 µs apart in one run and 0–5 apart in random order.
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for i := range b.N {
		for _, f := range rng.Perm(len(forms)) {
			form := forms[f]
			l := leases[i*len(forms)+f]
			cpu0, _ := backendCPU(pid)
			tx, err := conn.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			rows, err := tx.Query(ctx, form.sql, form.args(l.ID, l.Token)...)
			if err != nil {
				b.Fatal(err)
			}
			ids, err := scanIDs(rows)
			if err != nil || len(ids) != 1 {
				b.Fatalf("%s: complete job %d: %v, %d rows written; want 1", form.name, l.ID, err, len(ids))
			}
			stmt[f] += time.Since(start)
			if err := tx.Commit(ctx); err != nil {
				b.Fatal(err)
			}
			cpu1, _ := backendCPU(pid)
			cpu[f] += cpu1 - cpu0
		}
	}
	b.StopTimer()
	for f, form := range forms {
		b.ReportMetric(float64(stmt[f].Nanoseconds())/float64(b.N), form.name+"-stmt-ns/op")
		if cpuOK {
			b.ReportMetric(float64(cpu[f].Nanoseconds())/float64(b.N), form.name+"-server-cpu-ns/op")
		}
	}
}

// completeOneClockSQL is jobCompleteOneSQL as it was until statement
// timestamps: its clock a materialized CTE, as the batch forms' is, joined
// to the update; its bounded form set the settings as it read the clock.
// For BenchmarkCompleteOne's count only.
const completeOneClockSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now),
finished AS (
	UPDATE leasehold_job SET
		state = 'completed',
		finalized_at = clock.fin_now,
		completion_in_row = true
	FROM clock
	WHERE id = $1
		AND lease_token = $2
		AND lease_owner = $3
		AND state = 'running'
		AND lease_until > clock.fin_now
	RETURNING id
)
SELECT id FROM finished`

// completeOneAttemptRowSQL is jobCompleteOneSQL as schema version 11 had
// it, inserting the lease's attempt row, for BenchmarkCompleteOne's count
// only: since version 12 the completed job's row holds that lease.
const completeOneAttemptRowSQL = `
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now),
finished AS (
	UPDATE leasehold_job SET state = 'completed', finalized_at = clock.fin_now
	FROM clock
	WHERE id = $1 AND lease_token = $2 AND lease_owner = $3
		AND state = 'running' AND lease_until > clock.fin_now
	RETURNING ` + leaseColumns + `, clock.fin_now
)
` + attemptInsert + `
SELECT ` + leaseColumns + `, fin_now, 'completed', NULL
FROM finished
RETURNING job_id`

// insertForBench inserts n jobs into queue q and analyzes the job table.
func insertForBench(b *testing.B, d *Driver, n int) {
	b.Helper()
	params := make([]*driver.JobInsertParams, n)
	for i := range params {
		params[i] = testJob("q")
	}
	if _, err := d.GetExecutor().JobInsertFast(b.Context(), &driver.JobInsertFastParams{Jobs: params}); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Pool().Exec(b.Context(), "ANALYZE leasehold_job"); err != nil {
		b.Fatal(err)
	}
}

// completeOneRowsBoundSQL is jobCompleteOneSQL bounded by the earlier form
// of boundTxSettingsSQL: a row per setting, filtered, the rows counted into
// the clock's one row. BenchmarkCompleteOne compares the two forms.
var completeOneRowsBoundSQL = strings.Replace(completeOneClockSQL, finishClockSQL,
	`WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS fin_now,
	(SELECT count(*) FROM (SELECT set_config(s.name, $4::bigint::text, true)
		FROM (VALUES ('idle_in_transaction_session_timeout'), ('statement_timeout'), ('transaction_timeout')) AS s(name)
		WHERE current_setting(s.name, true) IS NOT NULL
			AND (current_setting(s.name, true)::interval <= interval '0'
				OR current_setting(s.name, true)::interval > $4::bigint * interval '1 millisecond')) AS bounds) AS fin_bounds)`, 1)

// benchConn acquires a connection of d's pool for the rest of the
// benchmark and returns it with its server backend's process ID, and
// whether backendCPU can read that backend's CPU time.
func benchConn(b *testing.B, d *Driver) (*pgxpool.Conn, int, bool) {
	b.Helper()
	conn, err := d.Pool().Acquire(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Release)
	var pid int
	if err := conn.QueryRow(b.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	_, cpuOK := backendCPU(pid)
	return conn, pid, cpuOK
}

// claimForBench inserts n jobs into queue q and claims them as owner w.
func claimForBench(b *testing.B, d *Driver, n int) []driver.LeaseRef {
	b.Helper()
	ctx := b.Context()
	exec := d.GetExecutor()
	insertForBench(b, d, n)
	leases := make([]driver.LeaseRef, 0, n)
	for len(leases) < n {
		got, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 1000, Owner: "w", DefaultLeaseTTL: time.Hour})
		if err != nil || len(got) == 0 {
			b.Fatalf("claim: %d jobs, %v", len(got), err)
		}
		for _, j := range got {
			leases = append(leases, driver.LeaseRef{ID: j.ID, Token: j.LeaseToken})
		}
	}
	return leases
}

// backendCPU is the CPU time of the server process pid so far, from
// /proc/PID/schedstat (false where it cannot be read: a server elsewhere).
func backendCPU(pid int) (time.Duration, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return 0, false
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ns), true
}
