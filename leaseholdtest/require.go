package leaseholdtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TB is the part of testing.TB the helpers use. *testing.T, *testing.B and
// *testing.F satisfy it; a test of test helpers can pass a fake that records
// failures. Every helper returns right after calling Fatalf, so a fake's
// Fatalf need not stop the goroutine.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

var _ TB = testing.TB(nil)

// RequireInsertedOpts are the properties a job must have. Zero fields are not
// checked.
type RequireInsertedOpts struct {
	// Queue is the job's queue.
	Queue string
	// Priority is the job's priority, 1 to 4.
	Priority int
	// MaxAttempts is the job's bound on handler errors.
	MaxAttempts int
	// UniqueKey is the job's idempotency key.
	UniqueKey string
	// State is the job's state.
	State leasetype.JobState
	// ScheduledAt is when the job may run, compared at microsecond precision
	// (what the databases store).
	ScheduledAt time.Time
}

// mismatches lists how row differs from o, empty when it matches.
func (o *RequireInsertedOpts) mismatches(row *leasetype.JobRow) []string {
	if o == nil {
		return nil
	}
	var out []string
	if o.Queue != "" && row.Queue != o.Queue {
		out = append(out, fmt.Sprintf("queue is %q, want %q", row.Queue, o.Queue))
	}
	if o.Priority != 0 && row.Priority != o.Priority {
		out = append(out, fmt.Sprintf("priority is %d, want %d", row.Priority, o.Priority))
	}
	if o.MaxAttempts != 0 && row.MaxAttempts != o.MaxAttempts {
		out = append(out, fmt.Sprintf("max attempts is %d, want %d", row.MaxAttempts, o.MaxAttempts))
	}
	if o.UniqueKey != "" && row.UniqueKey != o.UniqueKey {
		out = append(out, fmt.Sprintf("unique key is %q, want %q", row.UniqueKey, o.UniqueKey))
	}
	if o.State != "" && row.State != o.State {
		out = append(out, fmt.Sprintf("state is %s, want %s", row.State, o.State))
	}
	if !o.ScheduledAt.IsZero() {
		got, want := row.ScheduledAt.UTC().Truncate(time.Microsecond), o.ScheduledAt.UTC().Truncate(time.Microsecond)
		if !got.Equal(want) {
			out = append(out, fmt.Sprintf("scheduled at %s, want %s", got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano)))
		}
	}
	return out
}

// RequireInserted asserts that exactly one job of expected's kind exists,
// with the properties in opts (nil checks none), and returns it with its
// arguments decoded. Only expected's Kind is used; compare the returned
// job's Args yourself. It fails the test with Fatalf, listing the jobs it
// found, otherwise.
func RequireInserted[TTx any, T leasehold.JobArgs](ctx context.Context, t TB, d driver.Driver[TTx], expected T, opts *RequireInsertedOpts) *leasehold.Job[T] {
	t.Helper()
	return requireInserted(ctx, t, d.GetExecutor(), expected, opts)
}

// RequireInsertedTx is RequireInserted inside the caller's transaction: it
// sees the jobs tx inserted before they are committed.
func RequireInsertedTx[TTx any, T leasehold.JobArgs](ctx context.Context, t TB, d driver.Driver[TTx], tx TTx, expected T, opts *RequireInsertedOpts) *leasehold.Job[T] {
	t.Helper()
	return requireInserted(ctx, t, d.UnwrapExecutor(tx), expected, opts)
}

func requireInserted[T leasehold.JobArgs](ctx context.Context, t TB, exec driver.Executor, expected T, opts *RequireInsertedOpts) *leasehold.Job[T] {
	t.Helper()
	kind := expected.Kind()
	rows, err := listKinds(ctx, exec, []string{kind})
	if err != nil {
		t.Fatalf("leaseholdtest: list jobs of kind %q: %v", kind, err)
		return nil
	}
	if len(rows) != 1 {
		t.Fatalf("leaseholdtest: want exactly one job of kind %q, found %d%s", kind, len(rows), describeRows(rows))
		return nil
	}
	row := rows[0]
	if diff := opts.mismatches(row); len(diff) > 0 {
		t.Fatalf("leaseholdtest: job %d of kind %q does not match: %s%s", row.ID, kind, strings.Join(diff, "; "), describeRows(rows))
		return nil
	}
	var args T
	if err := json.Unmarshal(row.EncodedArgs, &args); err != nil {
		t.Fatalf("leaseholdtest: decode args of job %d (kind %q) into %T: %v; args: %s", row.ID, kind, args, err, row.EncodedArgs)
		return nil
	}
	return &leasehold.Job[T]{JobRow: row, Args: args}
}

// RequireNotInserted asserts that no job of expected's kind exists with the
// properties in opts; with nil opts, that no job of the kind exists at all.
// It fails the test with Fatalf, listing the matching jobs, otherwise.
func RequireNotInserted[TTx any, T leasehold.JobArgs](ctx context.Context, t TB, d driver.Driver[TTx], expected T, opts *RequireInsertedOpts) {
	t.Helper()
	requireNotInserted(ctx, t, d.GetExecutor(), expected, opts)
}

// RequireNotInsertedTx is RequireNotInserted inside the caller's
// transaction: it sees the jobs tx inserted before they are committed.
func RequireNotInsertedTx[TTx any, T leasehold.JobArgs](ctx context.Context, t TB, d driver.Driver[TTx], tx TTx, expected T, opts *RequireInsertedOpts) {
	t.Helper()
	requireNotInserted(ctx, t, d.UnwrapExecutor(tx), expected, opts)
}

func requireNotInserted[T leasehold.JobArgs](ctx context.Context, t TB, exec driver.Executor, expected T, opts *RequireInsertedOpts) {
	t.Helper()
	kind := expected.Kind()
	rows, err := listKinds(ctx, exec, []string{kind})
	if err != nil {
		t.Fatalf("leaseholdtest: list jobs of kind %q: %v", kind, err)
		return
	}
	var matching []*leasetype.JobRow
	for _, r := range rows {
		if len(opts.mismatches(r)) == 0 {
			matching = append(matching, r)
		}
	}
	if len(matching) > 0 {
		what := "no job of kind " + fmt.Sprintf("%q", kind)
		if opts != nil {
			what += " matching " + opts.String()
		}
		t.Fatalf("leaseholdtest: want %s, found %d%s", what, len(matching), describeRows(matching))
	}
}

// String describes the set fields of o, as in `queue "email", priority 2`.
func (o *RequireInsertedOpts) String() string {
	if o == nil {
		return "{}"
	}
	var parts []string
	if o.Queue != "" {
		parts = append(parts, fmt.Sprintf("queue %q", o.Queue))
	}
	if o.Priority != 0 {
		parts = append(parts, fmt.Sprintf("priority %d", o.Priority))
	}
	if o.MaxAttempts != 0 {
		parts = append(parts, fmt.Sprintf("max attempts %d", o.MaxAttempts))
	}
	if o.UniqueKey != "" {
		parts = append(parts, fmt.Sprintf("unique key %q", o.UniqueKey))
	}
	if o.State != "" {
		parts = append(parts, fmt.Sprintf("state %s", o.State))
	}
	if !o.ScheduledAt.IsZero() {
		parts = append(parts, "scheduled at "+o.ScheduledAt.UTC().Format(time.RFC3339Nano))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ExpectedJob is one job RequireManyInserted expects.
type ExpectedJob struct {
	// Args gives the job's kind; the arguments themselves are not compared.
	Args leasehold.JobArgs
	// Opts are the properties the job must have; nil checks none.
	Opts *RequireInsertedOpts
}

// RequireManyInserted asserts that the jobs of the kinds in expected are
// exactly the expected ones, in insertion (ID) order: the kinds of all jobs
// of those kinds, oldest first, equal the kinds of expected position by
// position, and each job has its expectation's properties. Jobs of other
// kinds are ignored. It returns the jobs in that order, and fails the test
// with Fatalf, listing what it found, otherwise.
func RequireManyInserted[TTx any](ctx context.Context, t TB, d driver.Driver[TTx], expected []ExpectedJob) []*leasetype.JobRow {
	t.Helper()
	return requireManyInserted(ctx, t, d.GetExecutor(), expected)
}

// RequireManyInsertedTx is RequireManyInserted inside the caller's
// transaction: it sees the jobs tx inserted before they are committed.
func RequireManyInsertedTx[TTx any](ctx context.Context, t TB, d driver.Driver[TTx], tx TTx, expected []ExpectedJob) []*leasetype.JobRow {
	t.Helper()
	return requireManyInserted(ctx, t, d.UnwrapExecutor(tx), expected)
}

func requireManyInserted(ctx context.Context, t TB, exec driver.Executor, expected []ExpectedJob) []*leasetype.JobRow {
	t.Helper()
	if len(expected) == 0 {
		t.Fatalf("leaseholdtest: RequireManyInserted needs at least one expected job")
		return nil
	}
	var kinds, wantKinds []string
	for i, e := range expected {
		if e.Args == nil {
			t.Fatalf("leaseholdtest: expected job %d has nil Args", i)
			return nil
		}
		wantKinds = append(wantKinds, e.Args.Kind())
		if !slices.Contains(kinds, e.Args.Kind()) {
			kinds = append(kinds, e.Args.Kind())
		}
	}
	rows, err := listKinds(ctx, exec, kinds)
	if err != nil {
		t.Fatalf("leaseholdtest: list jobs of kinds %q: %v", kinds, err)
		return nil
	}
	gotKinds := make([]string, len(rows))
	for i, r := range rows {
		gotKinds[i] = r.Kind
	}
	if !slices.Equal(gotKinds, wantKinds) {
		t.Fatalf("leaseholdtest: want jobs of kinds %q in this order, found %q%s", wantKinds, gotKinds, describeRows(rows))
		return nil
	}
	var problems []string
	for i, r := range rows {
		if diff := expected[i].Opts.mismatches(r); len(diff) > 0 {
			problems = append(problems, fmt.Sprintf("job %d (#%d, kind %q): %s", r.ID, i, r.Kind, strings.Join(diff, "; ")))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("leaseholdtest: inserted jobs do not match:\n\t%s%s", strings.Join(problems, "\n\t"), describeRows(rows))
		return nil
	}
	return rows
}

// listPage is the page size used to read every job of a kind.
const listPage = 1000

// listKinds returns every job of the given kinds, oldest (lowest ID) first.
func listKinds(ctx context.Context, exec driver.Executor, kinds []string) ([]*leasetype.JobRow, error) {
	var out []*leasetype.JobRow
	for _, kind := range kinds {
		var before int64
		for {
			page, err := exec.JobList(ctx, &driver.JobListParams{Kind: kind, BeforeID: before, Limit: listPage})
			if err != nil {
				return nil, err
			}
			out = append(out, page...)
			if len(page) < listPage {
				break
			}
			before = page[len(page)-1].ID
		}
	}
	slices.SortFunc(out, func(a, b *leasetype.JobRow) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// maxDescribed bounds the jobs listed in a failure message.
const maxDescribed = 20

// describeRows lists jobs for a failure message, one per line.
func describeRows(rows []*leasetype.JobRow) string {
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(":")
	for i, r := range rows {
		if i == maxDescribed {
			fmt.Fprintf(&b, "\n\t... and %d more", len(rows)-maxDescribed)
			break
		}
		b.WriteString("\n\t")
		b.WriteString(describeRow(r))
	}
	return b.String()
}

// describeRow is one line about a job.
func describeRow(r *leasetype.JobRow) string {
	args := string(r.EncodedArgs)
	if len(args) > 200 {
		args = args[:200] + "..."
	}
	s := fmt.Sprintf("job %d: kind %q, queue %q, state %s, priority %d, max attempts %d, scheduled at %s",
		r.ID, r.Kind, r.Queue, r.State, r.Priority, r.MaxAttempts, r.ScheduledAt.UTC().Format(time.RFC3339Nano))
	if r.UniqueKey != "" {
		s += fmt.Sprintf(", unique key %q", r.UniqueKey)
	}
	return s + ", args " + args
}
