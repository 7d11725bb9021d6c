package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/leasetype"
)

// TestBulkRetryCLI: jobs retry --state ... counts and refuses without
// --yes (stdin is not a terminal), then retries every matching job with
// it; other queues and states stay; running jobs are refused.
func TestBulkRetryCLI(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		var ids []int64
		for range 3 {
			j := b.enqueue(t, "--kind", "charge", "--queue", "payments")
			b.ok(t, "jobs", "discard", fmt.Sprint(j.ID))
			ids = append(ids, j.ID)
		}
		other := b.enqueue(t, "--kind", "charge", "--queue", "mail")
		b.ok(t, "jobs", "discard", fmt.Sprint(other.ID))

		r := b.fails(t, "not done: add --yes to retry these 3 jobs", "jobs", "retry", "--state", "discarded", "--queue", "payments")
		wantAll(t, "count line", r.out, "retry 3 discarded jobs of queue payments")
		if j := b.job(t, ids[0]); j.State != leasetype.JobStateDiscarded {
			t.Fatalf("job %d is %s after a refused bulk retry", ids[0], j.State)
		}

		out := b.ok(t, "jobs", "retry", "--state", "discarded", "--queue", "payments", "--batch-size", "2", "--yes")
		wantAll(t, "bulk retry", out, "retried 3 jobs in 2 batches")
		for _, id := range ids {
			if j := b.job(t, id); j.State != leasetype.JobStateAvailable {
				t.Fatalf("job %d is %s after bulk retry, want available", id, j.State)
			}
		}
		if j := b.job(t, other.ID); j.State != leasetype.JobStateDiscarded {
			t.Fatalf("job of queue mail is %s, want discarded", j.State)
		}
		out = b.ok(t, "jobs", "retry", "--state", "discarded", "--queue", "payments", "--yes")
		wantAll(t, "bulk retry of nothing", out, "retry 0 jobs: none matches")

		b.fails(t, "running jobs are never changed in bulk", "jobs", "delete", "--state", "running", "--yes")
		b.fails(t, "give job IDs, or --state", "jobs", "retry")
		b.fails(t, "not both", "jobs", "retry", "1", "--state", "discarded")
		b.fails(t, "--batch-size 0 is outside", "jobs", "discard", "--state", "available", "--batch-size", "0", "--yes")

		// Delete, older-than: nothing is an hour old.
		out = b.ok(t, "jobs", "delete", "--state", "available", "--older-than", "1h", "--yes")
		wantAll(t, "delete of young jobs", out, "delete 0 jobs")
		out = b.ok(t, "jobs", "delete", "--state", "available", "--queue", "payments", "--yes")
		wantAll(t, "delete", out, "deleted 3 jobs")
		b.fails(t, "not found", "jobs", "show", fmt.Sprint(ids[0]))
	})
}

// TestAuditCLI: the CLI's actions are recorded as cli:$USER@hostname, listed
// by leasehold audit, filtered by job and queue, as a table or JSON.
func TestAuditCLI(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		me := cliActor() // cli:$USER@hostname
		if !strings.HasPrefix(me, "cli:") || !strings.Contains(me, "@") {
			t.Fatalf("cliActor() = %q, want cli:<user>@<host>", me)
		}
		j := b.enqueue(t, "--kind", "charge", "--queue", "payments")
		b.ok(t, "jobs", "cancel", fmt.Sprint(j.ID))
		b.ok(t, "jobs", "retry", fmt.Sprint(j.ID))
		b.ok(t, "queues", "pause", "payments")
		b.fails(t, "cannot retry", "jobs", "retry", fmt.Sprint(j.ID)) // refused: recorded with 0 changed

		out := b.ok(t, "audit", "--json")
		var rows []*leasetype.AuditRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("audit --json printed %q: %v", out, err)
		}
		var got []string
		for _, r := range rows {
			if r.Actor != me {
				t.Fatalf("actor %q, want %q", r.Actor, me)
			}
			got = append(got, fmt.Sprintf("%s/%d/%d", r.Action, r.JobID, r.Count))
		}
		want := []string{fmt.Sprintf("retry/%d/0", j.ID), "pause/0/1", fmt.Sprintf("retry/%d/1", j.ID), fmt.Sprintf("cancel/%d/1", j.ID)}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("audit entries = %v, want %v", got, want)
		}

		out = b.ok(t, "audit", "--job", fmt.Sprint(j.ID))
		wantAll(t, "audit --job", out, "ACTOR", me, "cancel", "refused: the job is available")
		if strings.Contains(out, "pause") {
			t.Fatalf("audit --job lists the queue's pause:\n%s", out)
		}
		r := b.run(t, "audit", "--queue", "payments", "--limit", "1")
		if r.err != nil || strings.Count(r.out, "\n") != 2 || !strings.Contains(r.errOut, "more entries exist: add --before-id") {
			t.Fatalf("audit --limit 1: %v\n%s\n%s", r.err, r.out, r.errOut)
		}
		b.fails(t, "--limit 0 is outside", "audit", "--limit", "0")
	})
}
