package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// startClient starts a working client on the backend's database, as an
// application on another host would, and returns a function that stops it
// (also called at cleanup).
func (b *backend) startClient(t *testing.T, cfg *leasehold.Config) (stop func()) {
	t.Helper()
	if b.db.SQLite != nil {
		return startClient(t, b.db.SQLite, cfg)
	}
	return startClient(t, b.db.Postgres, cfg)
}

func startClient[TTx any](t *testing.T, d driver.Driver[TTx], cfg *leasehold.Config) (stop func()) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.PollInterval = 50 * time.Millisecond
	c, err := leasehold.NewClient(d, cfg)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.StopAndCancel(ctx); err != nil {
			t.Errorf("stop client: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// blockArgs is a job whose handler runs until its context ends.
type blockArgs struct{}

func (blockArgs) Kind() string { return "block" }

// waitUntil polls cond every 20 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestJobCancelRunning: jobs cancel on a job a worker is running reports
// "cancellation requested" with the row; the worker's handler then sees its
// context cancelled with ErrJobCancelled and the job ends cancelled.
func TestJobCancelRunning(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		started := make(chan int64, 1)
		causes := make(chan error, 1)
		workers := leasehold.NewWorkers()
		leasehold.AddWorker(workers, leasehold.WorkFunc[blockArgs](func(ctx context.Context, j *leasehold.Job[blockArgs]) error {
			started <- j.ID
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}))
		b.startClient(t, &leasehold.Config{Workers: workers})

		job := b.enqueue(t, "--kind", "block")
		select {
		case id := <-started:
			if id != job.ID {
				t.Fatalf("the worker started job %d, want %d", id, job.ID)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("job %d did not start", job.ID)
		}
		id := fmt.Sprint(job.ID)

		var res []*actionResultJSON
		if err := json.Unmarshal([]byte(b.ok(t, "jobs", "cancel", id, "--json")), &res); err != nil {
			t.Fatal(err)
		}
		if len(res) != 1 || res[0].ID != job.ID || res[0].Result != resultCancelRequested || res[0].Error != "" || res[0].Job == nil {
			t.Fatalf("jobs cancel --json = %+v", res)
		}
		if j := res[0].Job; j.State != leasetype.JobStateRunning || j.CancelRequestedAt == nil || j.LeaseOwner == "" {
			t.Fatalf("jobs cancel --json job = %+v; want running with cancel_requested_at", j)
		}
		select {
		case cause := <-causes:
			if !errors.Is(cause, leasehold.ErrJobCancelled) {
				t.Fatalf("the handler's context ended with %v, want ErrJobCancelled", cause)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the handler's context was not cancelled")
		}
		waitUntil(t, 10*time.Second, "the job is not cancelled", func() bool { return b.job(t, job.ID).State == leasetype.JobStateCancelled })
		row := b.job(t, job.ID)
		if row.CancelRequestedAt == nil || !row.CancelRequestedAt.Equal(*res[0].Job.CancelRequestedAt) {
			t.Errorf("the row's CancelRequestedAt %v, the CLI printed %v", row.CancelRequestedAt, res[0].Job.CancelRequestedAt)
		}
		attempts, err := b.exec().JobAttempts(t.Context(), &driver.JobAttemptsParams{JobID: job.ID})
		if err != nil || len(attempts) != 1 || attempts[0].Outcome != leasetype.OutcomeCancelled {
			t.Fatalf("attempts after the cancellation: %+v, %v; want one, cancelled", attempts, err)
		}

		out := b.ok(t, "jobs", "show", id)
		wantAll(t, "jobs show", out, "State             cancelled", "Cancel requested  "+fmtTime(row.CancelRequestedAt), "OUTCOME", "cancelled")
		// A finished job cannot be cancelled again.
		r := b.fails(t, "cancel: 1 of 1 jobs failed", "jobs", "cancel", id)
		wantAll(t, "stderr", r.errOut, "cannot cancel job "+id+": it is cancelled (only waiting, stuck or running jobs can be cancelled)")
	})
}

// everySchedule is a fixed-interval schedule aligned to the Unix epoch.
type everySchedule time.Duration

func (e everySchedule) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d).UTC()
}

func (e everySchedule) String() string { return "@every " + time.Duration(e).String() }

type tickArgs struct {
	Slot string `json:"slot"`
}

func (tickArgs) Kind() string { return "tick" }

// TestPeriodicList: periodic list shows the schedules a periodic client
// registered and enqueued, and those registered through the driver, with
// their next and last runs; --json carries the stored rows.
func TestPeriodicList(t *testing.T) {
	eachBackend(t, func(t *testing.T, b *backend) {
		migrated(t, b)
		if r := b.run(t, "periodic", "list"); r.err != nil || r.out != "" || !strings.Contains(r.errOut, "no periodic schedules") {
			t.Fatalf("periodic list on an empty database: %+v", r)
		}
		if out := b.ok(t, "periodic", "list", "--json"); out != "[]\n" {
			t.Fatalf("periodic list --json on an empty database: %q", out)
		}

		// A client with a periodic job: it registers the schedule and, as
		// the leader, enqueues its slots.
		workers := leasehold.NewWorkers()
		leasehold.AddWorker(workers, leasehold.WorkFunc[tickArgs](func(context.Context, *leasehold.Job[tickArgs]) error { return nil }))
		stop := b.startClient(t, &leasehold.Config{Workers: workers, PeriodicJobs: []*leasehold.PeriodicJob{{
			Name:     "reports.tick",
			Schedule: everySchedule(time.Second),
			Job: func(slot time.Time) (leasehold.JobArgs, *leasehold.InsertOpts) {
				return tickArgs{Slot: slot.Format(time.RFC3339)}, nil
			},
		}}})
		waitUntil(t, 15*time.Second, "the periodic client enqueued no slot", func() bool {
			rows, err := b.exec().PeriodicList(t.Context())
			return err == nil && len(rows) == 1 && rows[0].LastJobID != nil
		})
		stop()

		// Two more registered directly: one far ahead, one long overdue.
		now := time.Now().UTC().Truncate(time.Second)
		for _, p := range []*driver.PeriodicEnsureParams{
			{Name: "audit.weekly", Spec: "@weekly", NextRunAt: now.Add(72 * time.Hour)},
			{Name: "cleanup", Spec: "@every 1h0m0s", NextRunAt: now.Add(-2 * time.Hour)},
		} {
			if _, err := b.exec().PeriodicEnsure(t.Context(), p); err != nil {
				t.Fatalf("PeriodicEnsure %s: %v", p.Name, err)
			}
		}
		stored, err := b.exec().PeriodicList(t.Context())
		if err != nil || len(stored) != 3 {
			t.Fatalf("PeriodicList: %d rows, %v", len(stored), err)
		}
		tick := stored[2]
		if tick.Name != "reports.tick" || tick.LastRunAt == nil || tick.LastJobID == nil {
			t.Fatalf("stored tick schedule %+v", tick)
		}
		if j := b.job(t, *tick.LastJobID); j.Kind != "tick" {
			t.Fatalf("the tick schedule's last job %d is a %s job", j.ID, j.Kind)
		}

		out := b.ok(t, "periodic", "list")
		t.Logf("periodic list:\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 4 {
			t.Fatalf("periodic list: want a header and 3 schedules:\n%s", out)
		}
		wantAll(t, "header", lines[0], "NAME", "SPEC", "NEXT RUN", "LAST RUN", "LAST JOB")
		wantAll(t, "audit.weekly", lines[1], "audit.weekly", "@weekly", fmtTime(&stored[0].NextRunAt)+" (in 7", " - ")
		if !strings.Contains(lines[1], "(in 72h0m0s)") && !strings.Contains(lines[1], "(in 71h59m0s)") {
			t.Errorf("audit.weekly: next run not about 72h ahead: %q", lines[1])
		}
		if !strings.HasSuffix(lines[1], " -") {
			t.Errorf("audit.weekly has a last job: %q", lines[1])
		}
		wantAll(t, "cleanup", lines[2], "cleanup", "@every 1h0m0s", "(2h0m0s ago, overdue)")
		wantAll(t, "reports.tick", lines[3], "reports.tick", "@every 1s", fmtTime(&tick.NextRunAt), fmtTime(tick.LastRunAt)+" (",
			" ago)")
		if !strings.HasSuffix(lines[3], " "+fmt.Sprint(*tick.LastJobID)) {
			t.Errorf("reports.tick line does not end with its last job %d: %q", *tick.LastJobID, lines[3])
		}
		if strings.Count(out, "overdue") != 1 {
			t.Errorf("periodic list flags more than one schedule overdue:\n%s", out)
		}

		for _, args := range [][]string{{"periodic", "list", "--json"}, {"schedules", "list", "--json"}} {
			var got []*scheduleJSON
			if err := json.Unmarshal([]byte(b.ok(t, args...)), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 {
				t.Fatalf("%v: %d schedules", args, len(got))
			}
			for i, g := range got {
				w := stored[i]
				if g.Name != w.Name || g.Spec != w.Spec || !g.NextRunAt.Equal(w.NextRunAt) || !g.UpdatedAt.Equal(w.UpdatedAt) ||
					(g.LastRunAt == nil) != (w.LastRunAt == nil) || (g.LastJobID == nil) != (w.LastJobID == nil) {
					t.Fatalf("%v: schedule %d = %+v, stored %+v", args, i, g, w)
				}
			}
			if g := got[2]; !g.LastRunAt.Equal(*tick.LastRunAt) || *g.LastJobID != *tick.LastJobID {
				t.Fatalf("%v: tick last run %v job %d, stored %v job %d", args, g.LastRunAt, *g.LastJobID, tick.LastRunAt, *tick.LastJobID)
			}
		}
		raw := b.ok(t, "periodic", "list", "--json")
		wantAll(t, "periodic list --json", raw, `"name": "reports.tick"`, `"spec": "@every 1s"`, `"next_run_at": "`, `"last_run_at": "`,
			fmt.Sprintf(`"last_job_id": %d`, *tick.LastJobID), `"updated_at": "`)
	})
}
