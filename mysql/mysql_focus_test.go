package mysql

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

func testJob(queue string) *driver.JobInsertParams {
	return &driver.JobInsertParams{
		Kind: "test", Queue: queue, Priority: 1,
		EncodedArgs: []byte(`{"n": 1}`), Metadata: []byte(`{}`), MaxAttempts: 3,
	}
}

// tables counts the leasehold tables in the test database.
func tables(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM information_schema.tables
		WHERE table_schema = DATABASE()
		AND table_name IN ('leasehold_job', 'leasehold_attempt', 'leasehold_queue',
			'leasehold_limit', 'leasehold_leader', 'leasehold_periodic')`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, db := newTestDB(t)
	m := migrate.New(d)
	versions := len(d.Migrations())
	if up, err := m.Up(ctx); err != nil || len(up) != versions {
		t.Fatalf("up = %v, %v; want %d versions", up, err, versions)
	}
	if n := tables(t, db); n != 6 {
		t.Fatalf("after up: %d tables, want 6", n)
	}
	if down, err := m.DownTo(ctx, 0); err != nil || len(down) != versions {
		t.Fatalf("down = %v, %v; want all %d versions reverted", down, err, versions)
	}
	if n := tables(t, db); n != 0 {
		t.Fatalf("after down: %d tables, want 0", n)
	}
	if up, err := m.Up(ctx); err != nil || len(up) != versions {
		t.Fatalf("up again = %v, %v; want %d versions", up, err, versions)
	}
	if n := tables(t, db); n != 6 {
		t.Fatalf("after up again: %d tables, want 6", n)
	}
	if again, err := m.Up(ctx); err != nil || len(again) != 0 {
		t.Fatalf("idempotent up = %v, %v", again, err)
	}
}

// TestUniqueKeyConcurrent inserts the same key from many goroutines at once:
// exactly one insert wins, every other one gets that job back as skipped,
// and after the job completes the key is free for exactly one new job.
func TestUniqueKeyConcurrent(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	for round := range 2 {
		const n = 16
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []int64
			skipped = map[int64]int{}
			errs    []error
		)
		for range n {
			wg.Go(func() {
				p := testJob("uniq")
				p.UniqueKey = "pay-1"
				res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob("uniq"), p}})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				if res[1].UniqueSkipped {
					skipped[res[1].Job.ID]++
				} else {
					winners = append(winners, res[1].Job.ID)
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("round %d: insert errors: %v", round, errs)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d inserts won the key, want 1", round, len(winners))
		}
		if skipped[winners[0]] != n-1 || len(skipped) != 1 {
			t.Fatalf("round %d: skipped results %v, want %d pointing at job %d", round, skipped, n-1, winners[0])
		}
		// Finish the holder so the next round can take the key again.
		job, _, err := exec.JobSetState(t.Context(), &driver.JobSetStateParams{
			ID: winners[0], FromStates: []leasetype.JobState{leasetype.JobStateAvailable}, State: leasetype.JobStateCancelled,
		})
		if err != nil || job.State != leasetype.JobStateCancelled {
			t.Fatalf("round %d: cancel the holder: %v", round, err)
		}
	}
}

// TestClaimExclusive claims from 8 goroutines until the queue is empty: every
// job is leased exactly once, with token 1.
func TestClaimExclusive(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	const jobs = 400
	params := make([]*driver.JobInsertParams, jobs)
	for i := range params {
		params[i] = testJob("excl")
	}
	if n, err := exec.JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: params}); err != nil || n != jobs {
		t.Fatalf("JobInsertFast = %d, %v", n, err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		leased = map[int64]int{}
		errs   []error
	)
	for w := range 8 {
		wg.Go(func() {
			for {
				got, err := exec.JobClaim(t.Context(), &driver.JobClaimParams{
					Queue: "excl", Max: 7, Owner: fmt.Sprintf("w%d", w), DefaultLeaseTTL: time.Minute,
				})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, j := range got {
					leased[j.ID]++
					if j.LeaseToken != 1 || j.State != leasetype.JobStateRunning {
						errs = append(errs, fmt.Errorf("job %d: token %d state %s", j.ID, j.LeaseToken, j.State))
					}
				}
				mu.Unlock()
				if err != nil || len(got) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("claim errors: %v", errs)
	}
	if len(leased) != jobs {
		t.Fatalf("leased %d distinct jobs, want %d", len(leased), jobs)
	}
	for id, n := range leased {
		if n != 1 {
			t.Errorf("job %d leased %d times", id, n)
		}
	}
}

// TestTimesWithoutParseTime runs on a *sql.DB of the user's own, opened
// without parseTime and in a non-UTC session time zone: times still come
// back right, because the driver reads and writes them itself on UTC.
func TestTimesWithoutParseTime(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	cfg, err := mysqldriver.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	var dbName string
	if err := d.DB().QueryRowContext(t.Context(), "SELECT DATABASE()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	cfg.DBName = dbName
	cfg.MultiStatements = true
	cfg.Params = map[string]string{"time_zone": "'+05:30'"}
	own, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	exec := New(own).GetExecutor()

	at := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	p := testJob("tz")
	p.ScheduledAt = &at
	res, err := exec.JobInsertMany(t.Context(), &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{p}})
	if err != nil {
		t.Fatal(err)
	}
	job := res[0].Job
	if !job.ScheduledAt.Equal(at) || job.State != leasetype.JobStateScheduled {
		t.Errorf("scheduled_at = %s state %s, want %s scheduled", job.ScheduledAt, job.State, at)
	}
	now, err := exec.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Errorf("Now = %s, %s from the local clock; want UTC", now, d)
	}
	if got, err := d.GetExecutor().JobGet(t.Context(), &driver.JobGetParams{ID: job.ID}); err != nil || !got.ScheduledAt.Equal(at) {
		t.Errorf("through Open: scheduled_at = %v, %v; want %s", got, err, at)
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	_, _, err := Open("root@tcp(127.0.0.1:1)/test?timeout=2s")
	if err == nil {
		t.Fatal("Open of a closed port: got no error")
	}
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		t.Fatalf("Open of a closed port: got a server error %v", err)
	}
}

func TestDSN(t *testing.T) {
	t.Parallel()
	got, err := DSN("u:p@tcp(db:3306)/app?charset=utf8mb4")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := mysqldriver.ParseDSN(got)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.MultiStatements || !cfg.InterpolateParams || !cfg.ParseTime || cfg.Loc != time.UTC ||
		cfg.Params["time_zone"] != "'+00:00'" || cfg.DBName != "app" || cfg.Addr != "db:3306" {
		t.Errorf("DSN = %s: %+v", got, cfg)
	}
	if _, err := DSN("not a dsn"); err == nil {
		t.Error("DSN of garbage: got no error")
	}
}
