package main

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// TestTerminalSafe: a handler error holding terminal escapes (retitle the
// window, clear the screen) reaches jobs show and jobs list as visible
// escapes, never as raw control characters.
func TestTerminalSafe(t *testing.T) {
	t.Parallel()
	b := migrated(t, newSQLiteBackend(t))
	job := b.enqueue(t, "--kind", "evil", "--args", `{}`)
	row := b.claim(t, "default", "worker-1", time.Minute)
	const evil = "boom \x1b]0;owned\x07\x1b[2J\u009b31m done"
	written, err := b.exec().JobFinish(t.Context(), &driver.JobFinishParams{Owner: "worker-1", Items: []*driver.JobFinish{{
		ID: row.ID, Token: row.LeaseToken, State: leasetype.JobStateDiscarded, Outcome: leasetype.OutcomeFailed, Error: evil, CountError: true,
	}}})
	if err != nil || len(written) != 1 {
		t.Fatalf("finish the job: %v (%d written)", err, len(written))
	}
	for _, args := range [][]string{{"jobs", "show", strconv.FormatInt(job.ID, 10)}, {"jobs", "list", "--state", "discarded"}} {
		out := b.ok(t, args...)
		if strings.ContainsAny(out, "\x1b\x07\u009b") {
			t.Errorf("leasehold %s printed raw control characters: %q", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, `boom \x1b]0;owned\x07\x1b[2J`) {
			t.Errorf("leasehold %s does not show the escaped error: %q", strings.Join(args, " "), out)
		}
	}
	if got := termSafe("tab\tnewline\n ok"); got != "tab\tnewline\n ok" {
		t.Errorf("termSafe changed tabs or newlines: %q", got)
	}
}

// TestJobsListSaysWhenMoreMatch: a full page says how to get the next one.
func TestJobsListSaysWhenMoreMatch(t *testing.T) {
	t.Parallel()
	b := migrated(t, newSQLiteBackend(t))
	for range 3 {
		b.enqueue(t, "--kind", "page")
	}
	r := b.run(t, "jobs", "list", "--limit", "2")
	if r.err != nil || !strings.Contains(r.errOut, "more jobs match: the next 2 with --before-id 2") {
		t.Fatalf("jobs list --limit 2 of 3: %v, stderr %q", r.err, r.errOut)
	}
	if strings.Count(r.out, "page") != 2 {
		t.Fatalf("jobs list --limit 2 printed %q, want 2 rows", r.out)
	}
	r = b.run(t, "jobs", "list", "--limit", "3")
	if strings.Contains(r.errOut, "more jobs match") {
		t.Fatalf("jobs list showing every job says more match: %q", r.errOut)
	}
}
