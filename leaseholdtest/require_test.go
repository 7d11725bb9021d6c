package leaseholdtest_test

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/leasetype"
)

func TestRequireInserted(t *testing.T) {
	onBoth(t, testRequireInserted[*sql.Tx], testRequireInserted[pgx.Tx])
}

func testRequireInserted[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	c := newInserter(t, d)
	at := time.Now().Add(time.Hour).Round(time.Microsecond)
	inserted := insert(t, c, emailArgs{To: "ada@example.com"}, &leasehold.InsertOpts{
		Queue: "mail", Priority: 2, MaxAttempts: 5, UniqueKey: "welcome-ada", ScheduledAt: at,
	}).Job

	t.Run("Matches", func(t *testing.T) {
		job := leaseholdtest.RequireInserted(ctx, t, d, emailArgs{}, &leaseholdtest.RequireInsertedOpts{
			Queue: "mail", Priority: 2, MaxAttempts: 5, UniqueKey: "welcome-ada",
			State: leasetype.JobStateScheduled, ScheduledAt: at,
		})
		if job == nil || job.ID != inserted.ID || job.Args.To != "ada@example.com" {
			t.Fatalf("RequireInserted = %+v, want job %d with its args decoded", job, inserted.ID)
		}
		if job := leaseholdtest.RequireInserted(ctx, t, d, emailArgs{}, nil); job.ID != inserted.ID {
			t.Fatalf("RequireInserted without opts = job %d, want %d", job.ID, inserted.ID)
		}
	})

	t.Run("Mismatch", func(t *testing.T) {
		ft := &fakeTB{}
		job := leaseholdtest.RequireInserted(ctx, ft, d, emailArgs{}, &leaseholdtest.RequireInsertedOpts{
			Queue: "default", Priority: 2, MaxAttempts: 7, State: leasetype.JobStateAvailable, ScheduledAt: at.Add(time.Second),
		})
		if job != nil {
			t.Fatalf("RequireInserted returned job %d on a mismatch", job.ID)
		}
		msg := ft.requireFatal(t,
			"job "+strconv.FormatInt(inserted.ID, 10)+` of kind "email" does not match`,
			`queue is "mail", want "default"`, "max attempts is 5, want 7", "state is scheduled, want available", "scheduled at ",
			`unique key "welcome-ada"`, `args {"to":`, `"ada@example.com"}`)
		if strings.Contains(msg, "priority is") {
			t.Fatalf("message reports the matching priority:\n%s", msg)
		}
	})

	t.Run("None", func(t *testing.T) {
		ft := &fakeTB{}
		if job := leaseholdtest.RequireInserted(ctx, ft, d, smsArgs{}, nil); job != nil {
			t.Fatalf("RequireInserted returned job %d for a kind never inserted", job.ID)
		}
		ft.requireFatal(t, `want exactly one job of kind "sms", found 0`)
	})

	t.Run("TwoOfKind", func(t *testing.T) {
		second := insert(t, c, smsArgs{Number: "1"}, nil).Job
		third := insert(t, c, smsArgs{Number: "2"}, nil).Job
		ft := &fakeTB{}
		leaseholdtest.RequireInserted(ctx, ft, d, smsArgs{}, nil)
		ft.requireFatal(t, `want exactly one job of kind "sms", found 2:`,
			"job "+strconv.FormatInt(second.ID, 10)+":", "job "+strconv.FormatInt(third.ID, 10)+":", `"number":`, `"2"}`)
	})

	t.Run("Undecodable", func(t *testing.T) {
		d := b.new(t)
		insert(t, newInserter(t, d), emailArgsV2{To: 7}, nil)
		ft := &fakeTB{}
		if job := leaseholdtest.RequireInserted(ctx, ft, d, emailArgs{}, nil); job != nil {
			t.Fatalf("RequireInserted returned a job whose args do not decode")
		}
		ft.requireFatal(t, "decode args of job", "leaseholdtest_test.emailArgs", `args: {"to":`)
	})
}

func TestRequireInsertedTx(t *testing.T) {
	onBoth(t, testRequireInsertedTx[*sql.Tx], testRequireInsertedTx[pgx.Tx])
}

// testRequireInsertedTx: the Tx helpers see the caller's uncommitted jobs,
// the others do not.
func testRequireInsertedTx[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	c := newInserter(t, d)
	tx, err := b.begin(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer b.rollback(ctx, tx) //nolint:errcheck // no-op after commit
	res, err := c.InsertTx(ctx, tx, emailArgs{To: "grace@example.com"}, &leasehold.InsertOpts{Queue: "mail"})
	if err != nil {
		t.Fatalf("InsertTx: %v", err)
	}
	job := leaseholdtest.RequireInsertedTx(ctx, t, d, tx, emailArgs{}, &leaseholdtest.RequireInsertedOpts{Queue: "mail", State: leasetype.JobStateAvailable})
	if job.ID != res.Job.ID || job.Args.To != "grace@example.com" {
		t.Fatalf("RequireInsertedTx = job %d %+v, want job %d", job.ID, job.Args, res.Job.ID)
	}
	leaseholdtest.RequireManyInsertedTx(ctx, t, d, tx, []leaseholdtest.ExpectedJob{{Args: emailArgs{}}})
	ft := &fakeTB{}
	leaseholdtest.RequireNotInsertedTx(ctx, ft, d, tx, emailArgs{}, nil)
	ft.requireFatal(t, `want no job of kind "email", found 1`)

	// Outside the transaction the job does not exist yet.
	leaseholdtest.RequireNotInserted(ctx, t, d, emailArgs{}, nil)
	ft = &fakeTB{}
	leaseholdtest.RequireInserted(ctx, ft, d, emailArgs{}, nil)
	ft.requireFatal(t, `want exactly one job of kind "email", found 0`)

	if err := b.rollback(ctx, tx); err != nil {
		t.Fatal(err)
	}
	leaseholdtest.RequireNotInserted(ctx, t, d, emailArgs{}, nil)

	tx, err = b.begin(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InsertTx(ctx, tx, emailArgs{To: "linus@example.com"}, nil); err != nil {
		t.Fatalf("InsertTx: %v", err)
	}
	leaseholdtest.RequireNotInsertedTx(ctx, t, d, tx, smsArgs{}, nil)
	if err := b.commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if job := leaseholdtest.RequireInserted(ctx, t, d, emailArgs{}, nil); job.Args.To != "linus@example.com" {
		t.Fatalf("after commit, RequireInserted found args %+v", job.Args)
	}
}

func TestRequireNotInserted(t *testing.T) {
	onBoth(t, testRequireNotInserted[*sql.Tx], testRequireNotInserted[pgx.Tx])
}

func testRequireNotInserted[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	c := newInserter(t, d)
	leaseholdtest.RequireNotInserted(ctx, t, d, emailArgs{}, nil)
	job := insert(t, c, emailArgs{To: "ada@example.com"}, &leasehold.InsertOpts{Queue: "mail", Priority: 3}).Job

	// Opts that the job does not match: passes.
	leaseholdtest.RequireNotInserted(ctx, t, d, emailArgs{}, &leaseholdtest.RequireInsertedOpts{Queue: "default"})
	leaseholdtest.RequireNotInserted(ctx, t, d, emailArgs{}, &leaseholdtest.RequireInsertedOpts{Queue: "mail", Priority: 1})
	leaseholdtest.RequireNotInserted(ctx, t, d, smsArgs{}, nil)

	ft := &fakeTB{}
	leaseholdtest.RequireNotInserted(ctx, ft, d, emailArgs{}, nil)
	ft.requireFatal(t, `want no job of kind "email", found 1:`, "job "+strconv.FormatInt(job.ID, 10)+":")

	ft = &fakeTB{}
	leaseholdtest.RequireNotInserted(ctx, ft, d, emailArgs{}, &leaseholdtest.RequireInsertedOpts{Queue: "mail", State: leasetype.JobStateAvailable})
	ft.requireFatal(t, `want no job of kind "email" matching {queue "mail", state available}, found 1:`, `queue "mail"`)
}

func TestRequireManyInserted(t *testing.T) {
	onBoth(t, testRequireManyInserted[*sql.Tx], testRequireManyInserted[pgx.Tx])
}

func testRequireManyInserted[TTx any](t *testing.T, b backend[TTx]) {
	ctx := context.Background()
	d := b.new(t)
	c := newInserter(t, d)
	first := insert(t, c, emailArgs{To: "a"}, nil).Job
	insert(t, c, pushArgs{}, nil) // a kind not asked about is ignored
	second := insert(t, c, smsArgs{Number: "1"}, &leasehold.InsertOpts{Priority: 2}).Job
	third := insert(t, c, emailArgs{To: "b"}, &leasehold.InsertOpts{Queue: "mail"}).Job

	rows := leaseholdtest.RequireManyInserted(ctx, t, d, []leaseholdtest.ExpectedJob{
		{Args: emailArgs{}, Opts: &leaseholdtest.RequireInsertedOpts{Queue: "default"}},
		{Args: smsArgs{}, Opts: &leaseholdtest.RequireInsertedOpts{Priority: 2}},
		{Args: emailArgs{}, Opts: &leaseholdtest.RequireInsertedOpts{Queue: "mail"}},
	})
	if len(rows) != 3 || rows[0].ID != first.ID || rows[1].ID != second.ID || rows[2].ID != third.ID {
		t.Fatalf("RequireManyInserted returned %d rows, want jobs %d, %d, %d in order", len(rows), first.ID, second.ID, third.ID)
	}

	t.Run("WrongOrder", func(t *testing.T) {
		ft := &fakeTB{}
		if rows := leaseholdtest.RequireManyInserted(ctx, ft, d, []leaseholdtest.ExpectedJob{
			{Args: emailArgs{}}, {Args: emailArgs{}}, {Args: smsArgs{}},
		}); rows != nil {
			t.Fatalf("RequireManyInserted returned rows on a failure")
		}
		ft.requireFatal(t, `want jobs of kinds ["email" "email" "sms"] in this order, found ["email" "sms" "email"]:`)
	})

	t.Run("Missing", func(t *testing.T) {
		ft := &fakeTB{}
		leaseholdtest.RequireManyInserted(ctx, ft, d, []leaseholdtest.ExpectedJob{{Args: smsArgs{}}, {Args: smsArgs{}}})
		ft.requireFatal(t, `want jobs of kinds ["sms" "sms"] in this order, found ["sms"]:`)
	})

	t.Run("OptsMismatch", func(t *testing.T) {
		ft := &fakeTB{}
		leaseholdtest.RequireManyInserted(ctx, ft, d, []leaseholdtest.ExpectedJob{
			{Args: emailArgs{}}, {Args: smsArgs{}, Opts: &leaseholdtest.RequireInsertedOpts{Priority: 4}}, {Args: emailArgs{}},
		})
		ft.requireFatal(t, "inserted jobs do not match", "job "+strconv.FormatInt(second.ID, 10)+` (#1, kind "sms"): priority is 2, want 4`)
	})

	t.Run("NothingExpected", func(t *testing.T) {
		ft := &fakeTB{}
		leaseholdtest.RequireManyInserted(ctx, ft, d, nil)
		ft.requireFatal(t, "at least one expected job")
	})
}
