package drivertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Lease durations used by the suite. shortTTL is for leases a test lets
// expire; longTTL for leases that must outlive the test.
const (
	shortTTL = 250 * time.Millisecond
	longTTL  = time.Minute
)

// clockSlack is how far a time the driver wrote may fall outside the window
// of database-clock readings taken around the call. It covers rounding to the
// column's precision, not clock skew: there is only the database clock.
const clockSlack = 50 * time.Millisecond

// waitLimit bounds every condition the suite waits on.
const waitLimit = 10 * time.Second

// jobParams returns insert parameters for a plain job: priority 1, empty
// args and metadata, five attempts.
func jobParams(kind, queue string) *driver.JobInsertParams {
	return &driver.JobInsertParams{
		Kind:        kind,
		Queue:       queue,
		Priority:    1,
		EncodedArgs: []byte(`{}`),
		Metadata:    []byte(`{}`),
		MaxAttempts: 5,
	}
}

// claimParams returns claim parameters with a default TTL and no per-kind policy.
func claimParams(queue, owner string, max int, ttl time.Duration) *driver.JobClaimParams {
	return &driver.JobClaimParams{Queue: queue, Max: max, Owner: owner, DefaultLeaseTTL: ttl}
}

func mustNow(t *testing.T, exec driver.Executor) time.Time {
	t.Helper()
	now, err := exec.Now(t.Context())
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	return now
}

func mustInsertMany(t *testing.T, exec driver.Executor, params ...*driver.JobInsertParams) []*driver.JobInsertResult {
	t.Helper()
	res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: params})
	if err != nil {
		t.Fatalf("JobInsertMany: %v", err)
	}
	if len(res) != len(params) {
		t.Fatalf("JobInsertMany: got %d results for %d jobs", len(res), len(params))
	}
	for i, r := range res {
		if r == nil || r.Job == nil {
			t.Fatalf("JobInsertMany: result %d has no job", i)
		}
	}
	return res
}

// mustInsert inserts jobs that must not be unique-skipped and returns their rows.
func mustInsert(t *testing.T, exec driver.Executor, params ...*driver.JobInsertParams) []*leasetype.JobRow {
	t.Helper()
	res := mustInsertMany(t, exec, params...)
	rows := make([]*leasetype.JobRow, len(res))
	for i, r := range res {
		if r.UniqueSkipped {
			t.Fatalf("JobInsertMany: job %d unexpectedly unique-skipped (existing job %d)", i, r.Job.ID)
		}
		rows[i] = r.Job
	}
	return rows
}

func mustInsertOne(t *testing.T, exec driver.Executor, p *driver.JobInsertParams) *leasetype.JobRow {
	t.Helper()
	return mustInsert(t, exec, p)[0]
}

func mustGet(t *testing.T, exec driver.Executor, id int64) *leasetype.JobRow {
	t.Helper()
	job, err := exec.JobGet(t.Context(), &driver.JobGetParams{ID: id})
	if err != nil {
		t.Fatalf("JobGet(%d): %v", id, err)
	}
	return job
}

func mustClaim(t *testing.T, exec driver.Executor, p *driver.JobClaimParams) []*leasetype.JobRow {
	t.Helper()
	jobs, err := exec.JobClaim(t.Context(), p)
	if err != nil {
		t.Fatalf("JobClaim(queue %q, max %d): %v", p.Queue, p.Max, err)
	}
	if len(jobs) > p.Max {
		t.Fatalf("JobClaim: claimed %d jobs, Max is %d", len(jobs), p.Max)
	}
	return jobs
}

// mustClaimOne claims from a queue that must hold exactly one claimable job.
func mustClaimOne(t *testing.T, exec driver.Executor, p *driver.JobClaimParams) *leasetype.JobRow {
	t.Helper()
	jobs := mustClaim(t, exec, p)
	if len(jobs) != 1 {
		t.Fatalf("JobClaim(queue %q): claimed %d jobs, want 1", p.Queue, len(jobs))
	}
	return jobs[0]
}

// mustHeartbeat renews leases as lease owner owner.
func mustHeartbeat(t *testing.T, exec driver.Executor, owner string, leases ...driver.LeaseRenewal) []int64 {
	t.Helper()
	ids, err := exec.JobHeartbeat(t.Context(), &driver.JobHeartbeatParams{Owner: owner, Leases: leases})
	if err != nil {
		t.Fatalf("JobHeartbeat: %v", err)
	}
	return ids
}

// mustFinish ends leases as lease owner owner.
func mustFinish(t *testing.T, exec driver.Executor, owner string, items ...*driver.JobFinish) []int64 {
	t.Helper()
	ids, err := exec.JobFinish(t.Context(), &driver.JobFinishParams{Owner: owner, Items: items})
	if err != nil {
		t.Fatalf("JobFinish: %v", err)
	}
	return ids
}

func mustExpire(t *testing.T, exec driver.Executor, p *driver.JobExpireParams) []*leasetype.JobRow {
	t.Helper()
	jobs, err := exec.JobExpire(t.Context(), p)
	if err != nil {
		t.Fatalf("JobExpire: %v", err)
	}
	if p.Limit > 0 && len(jobs) > p.Limit {
		t.Fatalf("JobExpire: reclaimed %d jobs, Limit is %d", len(jobs), p.Limit)
	}
	return jobs
}

func mustAttempts(t *testing.T, exec driver.Executor, id int64) []*leasetype.AttemptRow {
	t.Helper()
	rows, err := exec.JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: id})
	if err != nil {
		t.Fatalf("JobAttempts(%d): %v", id, err)
	}
	return rows
}

func mustList(t *testing.T, exec driver.Executor, p *driver.JobListParams) []*leasetype.JobRow {
	t.Helper()
	jobs, err := exec.JobList(t.Context(), p)
	if err != nil {
		t.Fatalf("JobList: %v", err)
	}
	return jobs
}

// completeItem finishes a lease as completed.
func completeItem(job *leasetype.JobRow) *driver.JobFinish {
	return &driver.JobFinish{ID: job.ID, Token: job.LeaseToken, State: leasetype.JobStateCompleted, Outcome: leasetype.OutcomeCompleted}
}

// waitPast polls the database clock until it is after target.
func waitPast(t *testing.T, exec driver.Executor, target time.Time) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		now := mustNow(t, exec)
		if now.After(target) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("database clock did not pass %s within %s (now %s)", target, waitLimit, now)
		}
		wait := min(target.Sub(now)+time.Millisecond, 20*time.Millisecond)
		time.Sleep(max(wait, time.Millisecond))
	}
}

// waitLeaseExpired waits until every given job's lease has expired on the
// database clock.
func waitLeaseExpired(t *testing.T, exec driver.Executor, jobs ...*leasetype.JobRow) {
	t.Helper()
	var latest time.Time
	for _, j := range jobs {
		if j.LeaseUntil == nil {
			t.Fatalf("job %d has no lease", j.ID)
		}
		if j.LeaseUntil.After(latest) {
			latest = *j.LeaseUntil
		}
	}
	waitPast(t, exec, latest)
}

// leaseLost sets up the fencing scenario: worker-a claims a job with a short
// lease, the lease expires, JobExpire reclaims it and worker-b claims it
// again with a long lease. It returns A's and B's views of the job.
func leaseLost(t *testing.T, exec driver.Executor, queue string) (a, b *leasetype.JobRow) {
	t.Helper()
	mustInsertOne(t, exec, jobParams("fenced", queue))
	a = mustClaimOne(t, exec, claimParams(queue, "worker-a", 1, shortTTL))
	waitLeaseExpired(t, exec, a)
	expired := mustExpire(t, exec, &driver.JobExpireParams{Limit: 100})
	if len(expired) != 1 || expired[0].ID != a.ID || expired[0].State != leasetype.JobStateAvailable {
		t.Fatalf("JobExpire: got %s, want job %d available", describeJobs(expired), a.ID)
	}
	b = mustClaimOne(t, exec, claimParams(queue, "worker-b", 1, longTTL))
	if b.ID != a.ID {
		t.Fatalf("worker-b claimed job %d, want %d", b.ID, a.ID)
	}
	if b.LeaseToken <= a.LeaseToken {
		t.Fatalf("re-claim token = %d, want more than the first lease's %d", b.LeaseToken, a.LeaseToken)
	}
	return a, b
}

func describeJobs(jobs []*leasetype.JobRow) string {
	parts := make([]string, len(jobs))
	for i, j := range jobs {
		parts[i] = fmt.Sprintf("{id %d %s token %d}", j.ID, j.State, j.LeaseToken)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func jobIDs(jobs []*leasetype.JobRow) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// assertSameIDs compares two sets of IDs, ignoring order.
func assertSameIDs(t *testing.T, what string, got, want []int64) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s: got IDs %v, want %v", what, g, w)
	}
}

// assertWithin checks that got lies in [lo-clockSlack, hi+clockSlack].
func assertWithin(t *testing.T, what string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo.Add(-clockSlack)) || got.After(hi.Add(clockSlack)) {
		t.Errorf("%s = %s, want between %s and %s (database clock)", what, got, lo, hi)
	}
}

// assertWithinPtr is assertWithin for a nullable time, which must be set.
func assertWithinPtr(t *testing.T, what string, got *time.Time, lo, hi time.Time) {
	t.Helper()
	if got == nil {
		t.Errorf("%s is nil, want between %s and %s", what, lo, hi)
		return
	}
	assertWithin(t, what, *got, lo, hi)
}

// assertNear checks that got is want give or take tol.
func assertNear(t *testing.T, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tol || d > tol {
		t.Errorf("%s = %s, want %s (±%s, off by %s)", what, got, want, tol, d)
	}
}

// assertDuration checks that a time span the driver computed in one
// statement is want, give or take rounding.
func assertDuration(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	if d := got - want; d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// jsonEqual reports whether two JSON documents are equal as values (a
// database may reformat JSON or reorder an object's keys).
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(va, vb)
}

func timesEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// rowDiff lists the fields in which two job rows differ, in the order JobRow
// declares them. It walks the struct's fields, so a field added to JobRow is
// compared without being listed here: times as instants (time.Time.Equal, a
// nil *time.Time equal only to nil), the JSON documents as values
// (jsonEqual), and fields of a basic kind (integers, strings, durations, the
// string enums) with ==. A field of any other type is reported as a
// difference until a comparison for it is added here, rather than skipped;
// TestRowDiffComparesEveryField checks that a change to any field shows.
func rowDiff(got, want *leasetype.JobRow) []string {
	var diffs []string
	add := func(field string, g, w any) {
		diffs = append(diffs, fmt.Sprintf("%s: got %v, want %v", field, g, w))
	}
	str := func(p *time.Time) string {
		if p == nil {
			return "nil"
		}
		return p.String()
	}
	gv, wv := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		switch g := gv.Field(i).Interface().(type) {
		case time.Time:
			if w := wv.Field(i).Interface().(time.Time); !g.Equal(w) {
				add(name, g, w)
			}
		case *time.Time:
			if w := wv.Field(i).Interface().(*time.Time); !timesEqual(g, w) {
				add(name, str(g), str(w))
			}
		case []byte:
			if w := wv.Field(i).Interface().([]byte); !jsonEqual(g, w) {
				add(name, string(g), string(w))
			}
		default:
			switch gv.Field(i).Kind() {
			case reflect.Bool, reflect.String,
				reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				if w := wv.Field(i).Interface(); g != w {
					add(name, g, w)
				}
			default:
				diffs = append(diffs, fmt.Sprintf("%s: rowDiff has no comparison for its type %s; add one",
					name, gv.Field(i).Type()))
			}
		}
	}
	return diffs
}

// assertRowEqual checks that a job row is field for field as expected.
func assertRowEqual(t *testing.T, what string, got, want *leasetype.JobRow) {
	t.Helper()
	if diffs := rowDiff(got, want); len(diffs) > 0 {
		t.Errorf("%s differs:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

// assertUnchanged checks that the stored job is exactly the given row.
func assertUnchanged(t *testing.T, exec driver.Executor, what string, want *leasetype.JobRow) {
	t.Helper()
	assertRowEqual(t, what, mustGet(t, exec, want.ID), want)
}

// assertNotFound checks that err is, or wraps, driver.ErrNotFound.
func assertNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("%s: got error %v, want driver.ErrNotFound", what, err)
	}
}

// countJobs counts jobs matching a filter.
func countJobs(t *testing.T, exec driver.Executor, p driver.JobListParams) int {
	t.Helper()
	p.Limit = 100000
	return len(mustList(t, exec, &p))
}

// userTx begins a transaction of the user's kind and returns an executor in
// it. The transaction is rolled back at cleanup if the test did not end it.
func userTx[TTx any](t *testing.T, b Backend[TTx], d driver.Driver[TTx]) (TTx, driver.Executor) {
	t.Helper()
	tx, err := b.BeginTx(t.Context(), d)
	if err != nil {
		t.Fatalf("BeginTx: %v", err)
	}
	t.Cleanup(func() { _ = b.RollbackTx(context.Background(), tx) })
	return tx, d.UnwrapExecutor(tx)
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }

// title upper-cases the first letter of an ASCII word, for subtest names.
func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// mustBegin starts a transaction on exec (a savepoint when exec is in one).
// It is rolled back at cleanup if the test did not end it.
func mustBegin(t *testing.T, exec driver.Executor) driver.ExecutorTx {
	t.Helper()
	tx, err := exec.Begin(t.Context())
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

func mustCommit(t *testing.T, tx driver.ExecutorTx) {
	t.Helper()
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func mustRollback(t *testing.T, tx driver.ExecutorTx) {
	t.Helper()
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
}

// shortenLease renews a live lease with shortTTL, so that a test can wait
// for it to expire without claiming it with a TTL so short that a slow run
// could lose it before the renewal. It returns the renewed row.
func shortenLease(t *testing.T, exec driver.Executor, job *leasetype.JobRow) *leasetype.JobRow {
	t.Helper()
	if ids := mustHeartbeat(t, exec, "w", driver.LeaseRenewal{ID: job.ID, Token: job.LeaseToken, TTL: shortTTL}); len(ids) != 1 {
		t.Fatalf("heartbeat to shorten job %d's lease renewed %v", job.ID, ids)
	}
	return mustGet(t, exec, job.ID)
}
