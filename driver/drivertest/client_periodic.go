package drivertest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// everySchedule is a fixed-interval schedule aligned to the Unix epoch.
type everySchedule time.Duration

func (e everySchedule) Next(t time.Time) time.Time {
	d := time.Duration(e)
	return t.Truncate(d).Add(d).UTC()
}

func (e everySchedule) String() string { return "@every " + time.Duration(e).String() }

// periodicArgs is the job a periodic schedule enqueues.
type periodicArgs struct {
	Slot string `json:"slot"`
}

func (periodicArgs) Kind() string { return "drivertest_periodic" }

func periodicConfig(id string, every time.Duration, w *runLog) leasehold.Config {
	workers := leasehold.NewWorkers()
	leasehold.AddWorker(workers, leasehold.WorkFunc[periodicArgs](func(ctx context.Context, j *leasehold.Job[periodicArgs]) error {
		w.add(j.JobRow)
		return nil
	}))
	return leasehold.Config{
		ID: id, Workers: workers, LeaseTTL: time.Second, LeaderTTL: time.Second,
		PeriodicJobs: []*leasehold.PeriodicJob{{
			Name:     "tick",
			Schedule: everySchedule(every),
			Job: func(slot time.Time) (leasehold.JobArgs, *leasehold.InsertOpts) {
				return periodicArgs{Slot: slot.Format(time.RFC3339)}, nil
			},
		}},
	}
}

// periodicJobs lists the jobs a schedule enqueued, by slot, with the
// number of earlier slots each one stands for (periodic_missed).
func periodicJobs(t *testing.T, exec driver.Executor) (bySlot map[time.Time][]*leasetype.JobRow, missed map[time.Time]int) {
	t.Helper()
	rows, err := exec.JobList(context.Background(), &driver.JobListParams{Kind: periodicArgs{}.Kind(), Limit: 1000})
	if err != nil {
		t.Fatalf("JobList: %v", err)
	}
	bySlot, missed = map[time.Time][]*leasetype.JobRow{}, map[time.Time]int{}
	for _, r := range rows {
		var meta struct {
			Slot   string `json:"periodic_slot"`
			Missed int    `json:"periodic_missed"`
		}
		if err := json.Unmarshal(r.Metadata, &meta); err != nil || meta.Slot == "" {
			t.Fatalf("job %d: periodic metadata %s: %v", r.ID, r.Metadata, err)
		}
		slot, err := time.Parse(time.RFC3339Nano, meta.Slot)
		if err != nil {
			t.Fatalf("job %d: slot %q: %v", r.ID, meta.Slot, err)
		}
		if want := "periodic:tick:" + slot.UTC().Format(time.RFC3339); r.UniqueKey != want {
			t.Fatalf("job %d: unique key %q, want %q", r.ID, r.UniqueKey, want)
		}
		bySlot[slot] = append(bySlot[slot], r)
		missed[slot] = meta.Missed
	}
	return bySlot, missed
}

// testClientPeriodicLeaderKilled: three clients run one schedule every
// second; the leader is cut off from the database part-way. Every slot is
// enqueued exactly once (a slot passed during the take-over is covered by
// the catch-up job that stands for it), every job completes exactly once,
// and a survivor takes over.
func testClientPeriodicLeaderKilled[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	runs := newRunLog()
	type member struct {
		fd *faultDriver[TTx]
		c  *leasehold.Client[TTx]
	}
	var members []member
	for i := range 3 {
		fd := newFaultDriver(env.d)
		members = append(members, member{fd, env.client(fd, periodicConfig(fmt.Sprintf("member-%d", i), time.Second, runs))})
	}
	var leader member
	waitFor(t, 10*time.Second, func() bool {
		for _, m := range members {
			if m.c.Stats().PeriodicEnqueued >= 2 {
				leader = m
				return true
			}
		}
		return false
	}, func() string { return "no client enqueued two slots" })
	leader.fd.set(faultPartition)
	killedAt := time.Now()
	// The survivors take over within the leader TTL and enqueue on.
	waitFor(t, 10*time.Second, func() bool {
		for _, m := range members {
			if m != leader && m.c.Stats().PeriodicEnqueued >= 2 {
				return true
			}
		}
		return false
	}, func() string { return "no survivor enqueued two slots after the leader was killed" })
	t.Logf("leader %s killed; a survivor enqueued two slots %s later", leader.c.Owner(), time.Since(killedAt))
	time.Sleep(1500 * time.Millisecond)
	bySlot, missed := periodicJobs(t, env.exec)

	var slots []time.Time
	for s, jobs := range bySlot {
		if len(jobs) != 1 {
			t.Fatalf("slot %s enqueued %d times, want once", s, len(jobs))
		}
		slots = append(slots, s)
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].Before(slots[j]) })
	if len(slots) < 5 {
		t.Fatalf("only %d slots enqueued", len(slots))
	}
	// No slot unaccounted for between the first and the last.
	for i := 1; i < len(slots); i++ {
		gap := int(slots[i].Sub(slots[i-1]) / time.Second)
		if gap-1 != missed[slots[i]] {
			t.Fatalf("slots %s → %s: %d slots skipped, but the catch-up job records %d", slots[i-1].Format(time.RFC3339), slots[i].Format(time.RFC3339), gap-1, missed[slots[i]])
		}
	}
	// Each job completes exactly once: one completed attempt.
	for _, s := range slots[:len(slots)-1] {
		job := bySlot[s][0]
		row := env.waitState(job.ID, leasetype.JobStateCompleted, 10*time.Second)
		completed := 0
		for _, a := range env.attempts(row.ID) {
			if a.Outcome == leasetype.OutcomeCompleted {
				completed++
			}
		}
		if completed != 1 {
			t.Fatalf("slot %s: job %d has %d completed attempts, want 1", s, row.ID, completed)
		}
	}
}

// testClientPeriodicRestart: a schedule's next slot is stored, so a fleet
// that is down across a slot boundary runs that slot when it comes back.
func testClientPeriodicRestart[TTx any](t *testing.T, b Backend[TTx]) {
	const every = 2 * time.Second
	env := newClientEnv(t, b)
	runs := newRunLog()
	a, err := leasehold.NewClient(env.d, testConfig(periodicConfig("before", every, runs)))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitFor(t, 10*time.Second, func() bool { return a.Stats().PeriodicEnqueued >= 1 }, func() string { return "first slot not enqueued" })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	bySlot, _ := periodicJobs(t, env.exec)
	if len(bySlot) != 1 {
		t.Fatalf("%d slots enqueued before the restart, want 1", len(bySlot))
	}
	var first time.Time
	for s := range bySlot {
		first = s
	}
	// Down across the next slot boundary.
	next := first.Add(every)
	time.Sleep(time.Until(next) + 300*time.Millisecond)
	b2 := env.client(nil, periodicConfig("after", every, runs))
	waitFor(t, 10*time.Second, func() bool { return b2.Stats().PeriodicEnqueued >= 1 }, func() string { return "no slot enqueued after the restart" })
	bySlot, missed := periodicJobs(t, env.exec)
	jobs := bySlot[next]
	if len(jobs) != 1 {
		var got []string
		for s := range bySlot {
			got = append(got, s.Format(time.RFC3339))
		}
		t.Fatalf("slot %s passed during the restart was enqueued %d times (slots: %s), want once", next.Format(time.RFC3339), len(jobs), strings.Join(got, ", "))
	}
	if missed[next] != 0 {
		t.Fatalf("slot %s recorded %d missed slots, want 0", next.Format(time.RFC3339), missed[next])
	}
	if len(bySlot[first]) != 1 {
		t.Fatalf("first slot enqueued %d times after the restart", len(bySlot[first]))
	}
}

// testClientPeriodicLeaderStepsDown: a leader that keeps its lease but
// cannot get its transactions through steps down after a lease's worth of
// failures, and another client enqueues the schedule on.
func testClientPeriodicLeaderStepsDown[TTx any](t *testing.T, b Backend[TTx]) {
	env := newClientEnv(t, b)
	runs := newRunLog()
	type member struct {
		fd *faultDriver[TTx]
		c  *leasehold.Client[TTx]
	}
	var members []member
	for i := range 2 {
		fd := newFaultDriver(env.d)
		members = append(members, member{fd, env.client(fd, periodicConfig(fmt.Sprintf("member-%d", i), time.Second, runs))})
	}
	var leader, other member
	waitFor(t, 10*time.Second, func() bool {
		for i, m := range members {
			if m.c.Stats().PeriodicEnqueued >= 1 {
				leader, other = m, members[1-i]
				return true
			}
		}
		return false
	}, func() string { return "no client enqueued a slot" })
	leader.fd.set(faultTxOnly)
	brokenAt := time.Now()
	waitFor(t, 10*time.Second, func() bool { return other.c.Stats().PeriodicEnqueued >= 1 }, func() string {
		return "the other client never took over from a leader that cannot enqueue"
	})
	t.Logf("a leader that could not enqueue was replaced after %s (leader TTL 1s)", time.Since(brokenAt))
	bySlot, _ := periodicJobs(t, env.exec)
	for s, jobs := range bySlot {
		if len(jobs) != 1 {
			t.Fatalf("slot %s enqueued %d times, want once", s, len(jobs))
		}
	}
}
