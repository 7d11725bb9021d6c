package drivertest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// testClientAudit: every operator method records who did what to which
// job or queue, in the action's transaction, with the count it changed; a
// refused action is recorded with count 0.
func testClientAudit[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	admin := env.client(nil, leasehold.Config{})
	ctx := leasehold.WithActor(context.Background(), "cli:alice@host")
	job := insert(t, admin, blockArgs{Name: "a"}, &leasehold.InsertOpts{Queue: "pay"})

	if _, err := admin.JobDiscard(ctx, job.ID); err != nil {
		t.Fatalf("JobDiscard: %v", err)
	}
	if _, err := admin.JobDiscard(ctx, job.ID); !errors.Is(err, leasehold.ErrJobState) {
		t.Fatalf("second JobDiscard: %v, want ErrJobState", err)
	}
	if _, err := admin.JobRetry(context.Background(), job.ID); err != nil {
		t.Fatalf("JobRetry: %v", err)
	}
	if err := admin.QueuePause(ctx, "pay"); err != nil {
		t.Fatalf("QueuePause: %v", err)
	}
	if err := admin.QueueResume(ctx, "pay"); err != nil {
		t.Fatalf("QueueResume: %v", err)
	}

	rows, err := admin.AuditList(context.Background(), &leasehold.AuditListParams{JobID: job.ID})
	if err != nil {
		t.Fatalf("AuditList(job): %v", err)
	}
	type entry struct {
		actor, action string
		count         int64
	}
	var got []entry
	for _, r := range rows {
		if r.JobID != job.ID || r.Queue != "pay" {
			t.Fatalf("entry %+v: want job %d, queue pay", r, job.ID)
		}
		got = append(got, entry{r.Actor, r.Action, r.Count})
	}
	want := []entry{
		{leasehold.UnknownActor, "retry", 1},
		{"cli:alice@host", "discard", 0},
		{"cli:alice@host", "discard", 1},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("job entries, newest first = %+v, want %+v", got, want)
	}
	queue, err := admin.AuditList(context.Background(), &leasehold.AuditListParams{Queue: "pay", Actor: "cli:alice@host", Limit: 2})
	if err != nil {
		t.Fatalf("AuditList(queue): %v", err)
	}
	if len(queue) != 2 || queue[0].Action != "resume" || queue[1].Action != "pause" || queue[0].JobID != 0 {
		t.Fatalf("queue entries = %+v, want resume then pause", queue)
	}
}

// testClientBulk: JobBulk counts first (JobBulkCount), acts in batches of
// BatchSize with one audit entry per batch, refuses running for anything
// but cancel, and skips a retry whose unique key is held.
func testClientBulk[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	admin := env.client(nil, leasehold.Config{})
	ctx := leasehold.WithActor(context.Background(), "token")
	var ids []int64
	for range 5 {
		j := insert(t, admin, blockArgs{Name: "b"}, &leasehold.InsertOpts{Queue: "bulk"})
		if _, err := admin.JobDiscard(ctx, j.ID); err != nil {
			t.Fatalf("JobDiscard: %v", err)
		}
		ids = append(ids, j.ID)
	}
	other := insert(t, admin, blockArgs{Name: "other"}, &leasehold.InsertOpts{Queue: "elsewhere"})
	if _, err := admin.JobDiscard(ctx, other.ID); err != nil {
		t.Fatalf("JobDiscard: %v", err)
	}

	p := &leasehold.BulkParams{Action: leasehold.BulkRetry, States: []leasetype.JobState{leasetype.JobStateDiscarded}, Queue: "bulk", BatchSize: 2, Note: "incident 12"}
	if n, err := admin.JobBulkCount(ctx, p); err != nil || n != 5 {
		t.Fatalf("JobBulkCount = %d, %v; want 5", n, err)
	}
	res, err := admin.JobBulk(ctx, p)
	if err != nil {
		t.Fatalf("JobBulk: %v", err)
	}
	if res.Changed != 5 || res.Batches != 3 || len(res.Conflicts) != 0 {
		t.Fatalf("JobBulk = %+v, want 5 changed in 3 batches", res)
	}
	if n, err := admin.JobBulkCount(ctx, p); err != nil || n != 0 {
		t.Fatalf("JobBulkCount after = %d, %v; want 0", n, err)
	}
	for _, id := range ids {
		if r := env.job(id); r.State != leasetype.JobStateAvailable {
			t.Fatalf("job %d is %s after bulk retry", id, r.State)
		}
	}
	if r := env.job(other.ID); r.State != leasetype.JobStateDiscarded {
		t.Fatalf("job of another queue is %s, want discarded", r.State)
	}
	entries, err := admin.AuditList(context.Background(), &leasehold.AuditListParams{Queue: "bulk", Actor: "token"})
	if err != nil {
		t.Fatalf("AuditList: %v", err)
	}
	var batches []int64
	var batchIDs []int64
	for _, e := range entries {
		if e.Action == "bulk_retry" {
			batches = append(batches, e.Count)
			batchIDs = append(batchIDs, e.JobIDs...)
			if e.Note != "incident 12" {
				t.Fatalf("bulk entry note = %q", e.Note)
			}
		}
	}
	if !slices.Equal(batches, []int64{1, 2, 2}) {
		t.Fatalf("bulk_retry entries' counts, newest first = %v, want [1 2 2]", batches)
	}
	slices.Sort(batchIDs)
	if !slices.Equal(batchIDs, ids) {
		t.Fatalf("bulk entries' jobs = %v, want %v", batchIDs, ids)
	}
	// A bulk batch is found by its job.
	byJob, err := admin.AuditList(context.Background(), &leasehold.AuditListParams{JobID: ids[4]})
	if err != nil || len(byJob) == 0 || byJob[0].Action != "bulk_retry" {
		t.Fatalf("AuditList(job %d) = %+v, %v; want the bulk_retry first", ids[4], byJob, err)
	}

	for _, a := range []leasehold.BulkAction{leasehold.BulkRetry, leasehold.BulkDiscard, leasehold.BulkDelete} {
		_, err := admin.JobBulk(ctx, &leasehold.BulkParams{Action: a, States: []leasetype.JobState{leasetype.JobStateRunning}})
		if !errors.Is(err, leasehold.ErrInvalidArgs) {
			t.Fatalf("bulk %s of running jobs: %v, want ErrInvalidArgs", a, err)
		}
	}

	// Delete everything left in queue bulk (all available now).
	res, err = admin.JobBulk(ctx, &leasehold.BulkParams{Action: leasehold.BulkDelete, Queue: "bulk"})
	if err != nil || res.Changed != 5 {
		t.Fatalf("bulk delete = %+v, %v; want 5", res, err)
	}

	// Cancel in bulk: a waiting job is cancelled, a running one is asked to
	// stop (it stays running until its worker acts), each batch audited.
	insert(t, admin, blockArgs{Name: "r"}, &leasehold.InsertOpts{Queue: "run"})
	claimed, err := env.exec.JobClaim(context.Background(), &driver.JobClaimParams{Queue: "run", Max: 1, Owner: "bulk-test", DefaultLeaseTTL: longTTL})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	running := claimed[0]
	insert(t, admin, blockArgs{Name: "w"}, &leasehold.InsertOpts{Queue: "run"})
	res, err = admin.JobBulk(ctx, &leasehold.BulkParams{Action: leasehold.BulkCancel, Queue: "run"})
	if err != nil || res.Changed != 1 || res.CancelRequested != 1 {
		t.Fatalf("bulk cancel = %+v, %v; want 1 cancelled and 1 asked to stop", res, err)
	}
	if r := env.job(running.ID); r.State != leasetype.JobStateRunning || r.CancelRequestedAt == nil {
		t.Fatalf("running job after bulk cancel: %s, request %v; want running with a request", r.State, r.CancelRequestedAt)
	}
	byJob, err = admin.AuditList(context.Background(), &leasehold.AuditListParams{JobID: running.ID})
	if err != nil || len(byJob) != 1 || byJob[0].Action != "bulk_cancel_request" {
		t.Fatalf("AuditList(running job) = %+v, %v; want one bulk_cancel_request", byJob, err)
	}

	// A retry whose unique key another job took is skipped and reported.
	keyed := &leasehold.InsertOpts{Queue: "uniq", UniqueKey: "order-1"}
	first := insert(t, admin, blockArgs{Name: "u"}, keyed)
	if _, err := admin.JobCancel(ctx, first.ID); err != nil {
		t.Fatalf("JobCancel: %v", err)
	}
	insert(t, admin, blockArgs{Name: "u2"}, keyed)
	res, err = admin.JobBulk(ctx, &leasehold.BulkParams{Action: leasehold.BulkRetry, Queue: "uniq"})
	if err != nil || res.Changed != 0 || !slices.Equal(res.Conflicts, []int64{first.ID}) {
		t.Fatalf("bulk retry with a held key = %+v, %v; want the job reported as a conflict", res, err)
	}
}
