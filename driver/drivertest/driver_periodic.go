package drivertest

import (
	"strconv"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// exercisePeriodic specifies the stored schedules: PeriodicEnsure,
// PeriodicList and PeriodicAdvance, the compare-and-set fenced by a leader
// lease.
func exercisePeriodic[TTx any](t *testing.T, b Backend[TTx]) {
	t.Helper()

	// slot returns a schedule time an hour or more ahead, truncated to the
	// microsecond as the client passes it, with a sub-second part so that
	// lost precision shows.
	slot := func(t *testing.T, exec driver.Executor, hours int) time.Time {
		t.Helper()
		base := mustNow(t, exec).UTC().Truncate(time.Second)
		return base.Add(time.Duration(hours)*time.Hour + 123456*time.Microsecond)
	}

	t.Run("Ensure", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		at := slot(t, exec, 1)
		before := mustNow(t, exec)
		row := mustPeriodicEnsure(t, exec, "nightly", "0 3 * * *", at)
		after := mustNow(t, exec)
		if row.Spec != "0 3 * * *" || !row.NextRunAt.Equal(at) || row.LastRunAt != nil || row.LastJobID != nil {
			t.Errorf("inserted schedule = %s, want spec \"0 3 * * *\" next %s, never run", describePeriodic(row), at)
		}
		assertWithin(t, "UpdatedAt", row.UpdatedAt, before, after)

		// The same spec again keeps the stored next run: a restart does not
		// move the schedule.
		same := mustPeriodicEnsure(t, exec, "nightly", "0 3 * * *", at.Add(time.Hour))
		if same.Spec != "0 3 * * *" || !same.NextRunAt.Equal(at) {
			t.Errorf("ensure with the same spec = %s, want next run kept at %s", describePeriodic(same), at)
		}

		// Another spec replaces it and its next run.
		moved := at.Add(2 * time.Hour)
		changed := mustPeriodicEnsure(t, exec, "nightly", "@hourly", moved)
		if changed.Spec != "@hourly" || !changed.NextRunAt.Equal(moved) {
			t.Errorf("ensure with another spec = %s, want spec @hourly next %s", describePeriodic(changed), moved)
		}
		rows := mustPeriodicList(t, exec)
		if len(rows) != 1 || rows[0].Name != "nightly" || rows[0].Spec != "@hourly" || !rows[0].NextRunAt.Equal(moved) {
			t.Errorf("PeriodicList = %s, want only nightly, @hourly, next %s", describePeriodics(rows), moved)
		}
	})

	t.Run("ListInNameOrder", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		if rows := mustPeriodicList(t, exec); len(rows) != 0 {
			t.Errorf("PeriodicList of an empty database = %s, want none", describePeriodics(rows))
		}
		at := slot(t, exec, 1)
		want := map[string]time.Time{"b": at, "c": at.Add(time.Hour), "a": at.Add(2 * time.Hour)}
		for _, name := range []string{"b", "c", "a"} {
			mustPeriodicEnsure(t, exec, name, "spec-"+name, want[name])
		}
		rows := mustPeriodicList(t, exec)
		if len(rows) != 3 {
			t.Fatalf("PeriodicList = %s, want 3 rows", describePeriodics(rows))
		}
		for i, name := range []string{"a", "b", "c"} {
			r := rows[i]
			if r.Name != name || r.Spec != "spec-"+name || !r.NextRunAt.Equal(want[name]) {
				t.Errorf("PeriodicList row %d = %s, want %s spec-%s next %s", i, describePeriodic(r), name, name, want[name])
			}
		}
	})

	t.Run("AdvanceOnce", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		leader := mustLeaderAttempt(t, exec, "scheduler", "a", 0, longTTL)
		mustPeriodicEnsure(t, exec, "nightly", "spec", slot(t, exec, 1))
		job := mustInsertOne(t, exec, jobParams("nightly", "q"))
		// From is passed exactly as the driver returned it.
		from := mustPeriodicList(t, exec)[0].NextRunAt
		next := from.Add(24 * time.Hour)
		adv := &driver.PeriodicAdvanceParams{Name: "nightly", From: from, Next: next, SlotAt: from, LastJobID: job.ID, LeaderName: "scheduler", LeaderToken: leader.Token}

		before := mustNow(t, exec)
		if !mustPeriodicAdvance(t, exec, adv) {
			t.Fatalf("PeriodicAdvance from the stored NextRunAt with a live leader: false, want true")
		}
		after := mustNow(t, exec)
		row := mustPeriodicList(t, exec)[0]
		if !row.NextRunAt.Equal(next) || !timesEqual(row.LastRunAt, &from) || row.LastJobID == nil || *row.LastJobID != job.ID || row.Spec != "spec" {
			t.Errorf("after the advance: %s, want next %s, last run %s, last job %d", describePeriodic(row), next, from, job.ID)
		}
		assertWithin(t, "UpdatedAt", row.UpdatedAt, before, after)

		// The same advance again finds NextRunAt moved: a second scheduler
		// that read the old slot does not run it twice.
		if mustPeriodicAdvance(t, exec, adv) {
			t.Errorf("second PeriodicAdvance from the same From: true, want false")
		}
		assertPeriodicUnchanged(t, exec, row)

		// The next slot advances from where the first left it.
		adv2 := *adv
		adv2.From, adv2.Next, adv2.SlotAt = row.NextRunAt, row.NextRunAt.Add(24*time.Hour), row.NextRunAt
		if !mustPeriodicAdvance(t, exec, &adv2) {
			t.Errorf("PeriodicAdvance from the new NextRunAt: false, want true")
		}
		if got := mustPeriodicList(t, exec)[0]; !got.NextRunAt.Equal(adv2.Next) || !timesEqual(got.LastRunAt, &adv2.SlotAt) {
			t.Errorf("after the second advance: %s, want next %s last run %s", describePeriodic(got), adv2.Next, adv2.SlotAt)
		}
	})

	t.Run("AdvanceWithoutJob", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		leader := mustLeaderAttempt(t, exec, "scheduler", "a", 0, longTTL)
		from := mustPeriodicEnsure(t, exec, "skipped", "spec", slot(t, exec, 1)).NextRunAt
		adv := &driver.PeriodicAdvanceParams{Name: "skipped", From: from, Next: from.Add(time.Hour), SlotAt: from, LeaderName: "scheduler", LeaderToken: leader.Token}
		if !mustPeriodicAdvance(t, exec, adv) {
			t.Fatalf("PeriodicAdvance with LastJobID 0: false, want true")
		}
		if row := mustPeriodicList(t, exec)[0]; row.LastJobID != nil || !timesEqual(row.LastRunAt, &from) {
			t.Errorf("after an advance with LastJobID 0: %s, want last run %s and no last job", describePeriodic(row), from)
		}
	})

	t.Run("AdvanceFencedByLeader", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		stored := mustPeriodicEnsure(t, exec, "nightly", "spec", slot(t, exec, 1))
		from := stored.NextRunAt
		advance := func(leaderName string, token int64) bool {
			t.Helper()
			return mustPeriodicAdvance(t, exec, &driver.PeriodicAdvanceParams{
				Name: "nightly", From: from, Next: from.Add(time.Hour), SlotAt: from, LastJobID: 1, LeaderName: leaderName, LeaderToken: token,
			})
		}

		if advance("scheduler", 1) {
			t.Errorf("PeriodicAdvance with no leader lease at all: true, want false")
		}
		mustLeaderAttempt(t, exec, "scheduler", "a", 0, longTTL)
		mustLeaderAttempt(t, exec, "other", "a", 0, longTTL)
		if advance("scheduler", 2) {
			t.Errorf("PeriodicAdvance with a token the leader does not hold: true, want false")
		}
		if advance("elsewhere", 1) {
			t.Errorf("PeriodicAdvance naming a leader lease that does not exist: true, want false")
		}
		assertPeriodicUnchanged(t, exec, stored)

		// Token 1's lease expires: it no longer advances, though nobody took over.
		short := mustLeaderAttempt(t, exec, "scheduler", "a", 1, shortTTL)
		waitPast(t, exec, short.LeaseUntil)
		if advance("scheduler", 1) {
			t.Errorf("PeriodicAdvance with an expired leader lease: true, want false")
		}
		assertPeriodicUnchanged(t, exec, stored)

		// b takes over with token 2: the old leader stays fenced out.
		if taken := mustLeaderAttempt(t, exec, "scheduler", "b", 0, longTTL); taken.Owner != "b" || taken.Token != 2 {
			t.Fatalf("take-over: %+v, want b with token 2", *taken)
		}
		if advance("scheduler", 1) {
			t.Errorf("PeriodicAdvance with the old leader's token: true, want false")
		}
		assertPeriodicUnchanged(t, exec, stored)
		if !advance("scheduler", 2) {
			t.Errorf("PeriodicAdvance with the new leader's token: false, want true")
		}
		if row := mustPeriodicList(t, exec)[0]; !row.NextRunAt.Equal(from.Add(time.Hour)) {
			t.Errorf("after the new leader's advance: %s, want next %s", describePeriodic(row), from.Add(time.Hour))
		}
	})

	t.Run("AdvanceInTxRolledBack", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		leader := mustLeaderAttempt(t, exec, "scheduler", "a", 0, longTTL)
		stored := mustPeriodicEnsure(t, exec, "nightly", "spec", slot(t, exec, 1))
		from := stored.NextRunAt

		tx := mustBegin(t, exec)
		job := mustInsertOne(t, tx, jobParams("nightly", "q"))
		adv := &driver.PeriodicAdvanceParams{Name: "nightly", From: from, Next: from.Add(time.Hour), SlotAt: from, LastJobID: job.ID, LeaderName: "scheduler", LeaderToken: leader.Token}
		if !mustPeriodicAdvance(t, tx, adv) {
			t.Fatalf("PeriodicAdvance in a transaction: false, want true")
		}
		if row := mustPeriodicList(t, tx)[0]; !row.NextRunAt.Equal(adv.Next) {
			t.Errorf("inside the transaction: %s, want next %s", describePeriodic(row), adv.Next)
		}
		mustRollback(t, tx)

		assertPeriodicUnchanged(t, exec, stored)
		if n := countJobs(t, exec, driver.JobListParams{}); n != 0 {
			t.Errorf("jobs after the rollback = %d, want 0", n)
		}
		// The slot is still due: the next attempt runs it.
		tx = mustBegin(t, exec)
		job = mustInsertOne(t, tx, jobParams("nightly", "q"))
		adv.LastJobID = job.ID
		if !mustPeriodicAdvance(t, tx, adv) {
			t.Fatalf("PeriodicAdvance after the rollback: false, want true")
		}
		mustCommit(t, tx)
		row := mustPeriodicList(t, exec)[0]
		if !row.NextRunAt.Equal(adv.Next) || row.LastJobID == nil || *row.LastJobID != job.ID {
			t.Errorf("after the committed advance: %s, want next %s last job %d", describePeriodic(row), adv.Next, job.ID)
		}
		mustGet(t, exec, job.ID)
	})

	t.Run("AdvanceInTxAfterLeaderExpiry", func(t *testing.T) {
		t.Parallel()
		exec := b.New(t).GetExecutor()
		mustLeaderAttempt(t, exec, "scheduler", "a", 0, longTTL)
		stored := mustPeriodicEnsure(t, exec, "nightly", "spec", slot(t, exec, 1))
		short := mustLeaderAttempt(t, exec, "scheduler", "a", 1, shortTTL)
		renewed := time.Now()
		// The transaction starts while the lease is live and advances after
		// it expired: the check must use the time of the write, not of the
		// transaction's start.
		tx := mustBegin(t, exec)
		if rows := mustPeriodicList(t, tx); len(rows) != 1 {
			t.Fatalf("PeriodicList in the transaction: %d rows, want 1", len(rows))
		}
		// Only the transaction's executor may be used while it is open, so
		// wait on the local clock: the lease ends at most shortTTL after the
		// renewal returned.
		time.Sleep(time.Until(renewed.Add(shortTTL + 100*time.Millisecond)))
		if mustPeriodicAdvance(t, tx, &driver.PeriodicAdvanceParams{
			Name: "nightly", From: stored.NextRunAt, Next: stored.NextRunAt.Add(time.Hour), SlotAt: stored.NextRunAt,
			LeaderName: "scheduler", LeaderToken: short.Token,
		}) {
			t.Errorf("PeriodicAdvance in a transaction after the leader lease expired: true, want false")
		}
		mustCommit(t, tx)
		assertPeriodicUnchanged(t, exec, stored)
	})
}

func mustPeriodicEnsure(t *testing.T, exec driver.Executor, name, spec string, next time.Time) *leasetype.PeriodicSchedule {
	t.Helper()
	row, err := exec.PeriodicEnsure(t.Context(), &driver.PeriodicEnsureParams{Name: name, Spec: spec, NextRunAt: next})
	if err != nil {
		t.Fatalf("PeriodicEnsure(%s): %v", name, err)
	}
	if row == nil || row.Name != name {
		t.Fatalf("PeriodicEnsure(%s): returned %+v", name, row)
	}
	return row
}

func mustPeriodicList(t *testing.T, exec driver.Executor) []*leasetype.PeriodicSchedule {
	t.Helper()
	rows, err := exec.PeriodicList(t.Context())
	if err != nil {
		t.Fatalf("PeriodicList: %v", err)
	}
	return rows
}

func mustPeriodicAdvance(t *testing.T, exec driver.Executor, p *driver.PeriodicAdvanceParams) bool {
	t.Helper()
	ok, err := exec.PeriodicAdvance(t.Context(), p)
	if err != nil {
		t.Fatalf("PeriodicAdvance(%s from %s): %v", p.Name, p.From, err)
	}
	return ok
}

// assertPeriodicUnchanged checks that the stored schedule is exactly want.
func assertPeriodicUnchanged(t *testing.T, exec driver.Executor, want *leasetype.PeriodicSchedule) {
	t.Helper()
	for _, r := range mustPeriodicList(t, exec) {
		if r.Name != want.Name {
			continue
		}
		if r.Spec != want.Spec || !r.NextRunAt.Equal(want.NextRunAt) || !timesEqual(r.LastRunAt, want.LastRunAt) ||
			!int64PtrEqual(r.LastJobID, want.LastJobID) || !r.UpdatedAt.Equal(want.UpdatedAt) {
			t.Errorf("schedule %s changed: got %s, want %s", want.Name, describePeriodic(r), describePeriodic(want))
		}
		return
	}
	t.Errorf("schedule %s is missing", want.Name)
}

func int64PtrEqual(a, b *int64) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func describePeriodic(r *leasetype.PeriodicSchedule) string {
	last, job := "nil", "nil"
	if r.LastRunAt != nil {
		last = r.LastRunAt.String()
	}
	if r.LastJobID != nil {
		job = strconv.FormatInt(*r.LastJobID, 10)
	}
	return "{" + r.Name + " spec " + r.Spec + " next " + r.NextRunAt.String() + " last run " + last + " last job " + job + " updated " + r.UpdatedAt.String() + "}"
}

func describePeriodics(rows []*leasetype.PeriodicSchedule) string {
	s := "["
	for i, r := range rows {
		if i > 0 {
			s += " "
		}
		s += describePeriodic(r)
	}
	return s + "]"
}
