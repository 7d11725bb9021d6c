package mysql

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// showCreate returns the definitions of the leasehold tables, in name order.
func showCreate(t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT table_name FROM information_schema.tables
		WHERE table_schema = DATABASE() AND table_name LIKE 'leasehold\_%' AND table_name <> 'leasehold_migration'
		ORDER BY table_name`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		var name, def string
		if err := db.QueryRowContext(t.Context(), "SHOW CREATE TABLE "+n).Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		// AUTO_INCREMENT=n depends on the rows, not the schema.
		if i := strings.Index(def, " AUTO_INCREMENT="); i >= 0 {
			j := strings.IndexByte(def[i+1:], ' ')
			if j < 0 {
				j = len(def) - i - 1
			}
			def = def[:i] + def[i+1+j:]
		}
		b.WriteString(def + "\n")
	}
	return b.String()
}

// TestMigration3RevertsExactly: version 3's down migration leaves the schema
// of version 2, byte for byte as the server shows it, with rows in it.
func TestMigration3RevertsExactly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d, db := newTestDB(t)
	m := migrate.New(d)
	if _, err := m.UpTo(ctx, 2); err != nil {
		t.Fatal(err)
	}
	// A row of version 2 (the driver writes version 3's columns).
	if _, err := db.ExecContext(ctx, `INSERT INTO leasehold_job
		(kind, queue, args, metadata, unique_key, max_attempts, scheduled_at, created_at)
		VALUES ('k', 'q', '{}', '{}', 'key', 1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	before := showCreate(t, db)
	if _, err := m.UpTo(ctx, 3); err != nil {
		t.Fatalf("up to 3: %v", err)
	}
	if _, err := m.DownTo(ctx, 2); err != nil {
		t.Fatalf("down to 2: %v", err)
	}
	if after := showCreate(t, db); after != before {
		t.Fatalf("schema after 3 up and down differs from version 2:\n--- before\n%s\n--- after\n%s", before, after)
	}
}

// TestLimitLockNeedsDriverTransaction: LimitLock refuses the pool and a
// user's transaction (its isolation level is the user's) and works in a
// transaction from Begin and in a savepoint nested in one.
func TestLimitLockNeedsDriverTransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	key := driver.LimitKey{Scope: driver.LimitScopeQueue, Name: "q"}
	if _, err := d.GetExecutor().LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{key}}); !errors.Is(err, errLimitLockTx) {
		t.Errorf("LimitLock on the pool: %v, want errLimitLockTx", err)
	}
	userTx, err := d.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer userTx.Rollback() //nolint:errcheck // test cleanup
	inUser, err := d.UnwrapExecutor(userTx).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inUser.LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{key}}); !errors.Is(err, errLimitLockTx) {
		t.Errorf("LimitLock in a savepoint of a user's transaction: %v, want errLimitLockTx", err)
	}
	tx, err := d.GetExecutor().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // test cleanup
	nested, err := tx.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := nested.LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{key, key}})
	if err != nil || len(rows) != 2 || rows[0].Key != key || rows[1].Key != key {
		t.Fatalf("LimitLock of a key twice in a nested transaction = %v, %v", rows, err)
	}
}

// TestCancelRequestedExactOwner: the cancellation index holds the first 255
// characters of the owner; the lookup still matches the whole owner, byte
// for byte (utf8mb4_bin would ignore a trailing space).
func TestCancelRequestedExactOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	exec := newTestDriver(t).GetExecutor()
	long := strings.Repeat("w", 300)
	owners := []string{long + "-a", long + "-b", "short", "short "}
	ids := map[string]int64{}
	for _, owner := range owners {
		if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob("cancel")}}); err != nil {
			t.Fatal(err)
		}
		jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "cancel", Max: 1, Owner: owner, DefaultLeaseTTL: time.Minute})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("claim as %q: %v, %v", owner, jobs, err)
		}
		if _, running, err := exec.JobCancelRunning(ctx, &driver.JobCancelRunningParams{ID: jobs[0].ID}); err != nil || !running {
			t.Fatalf("cancel job %d: running %v, %v", jobs[0].ID, running, err)
		}
		ids[owner] = jobs[0].ID
	}
	for _, owner := range owners {
		refs, err := exec.JobCancelRequested(ctx, &driver.JobCancelRequestedParams{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 1 || refs[0].ID != ids[owner] || refs[0].Token != 1 {
			t.Errorf("cancellations of %q = %+v, want job %d token 1 only", owner[max(0, len(owner)-8):], refs, ids[owner])
		}
	}
}

// TestPruneMoreThanOneDelete: a prune larger than one DELETE's batch deletes
// exactly its limit, oldest first.
func TestPruneMoreThanOneDelete(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	const n = pruneDeleteBatch*2 + 10
	params := make([]*driver.JobInsertParams, n)
	for i := range params {
		params[i] = testJob("prune")
	}
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: params}); err != nil {
		t.Fatal(err)
	}
	// Finalized one second apart, by ID, an hour and more ago.
	if _, err := d.DB().ExecContext(ctx, `UPDATE leasehold_job
		SET state = 'completed', finalized_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR - INTERVAL (100000 - id) SECOND`); err != nil {
		t.Fatal(err)
	}
	completed := []leasetype.JobState{leasetype.JobStateCompleted}
	if got, err := exec.JobPrune(ctx, &driver.JobPruneParams{States: completed}); err != nil || got != 0 {
		t.Fatalf("JobPrune without a limit = %d, %v; want 0 (a limit below one deletes nothing)", got, err)
	}
	limit := pruneDeleteBatch*2 + 5
	got, err := exec.JobPrune(ctx, &driver.JobPruneParams{States: completed, OlderThan: time.Minute, Limit: limit})
	if err != nil || got != int64(limit) {
		t.Fatalf("JobPrune = %d, %v; want %d", got, err, limit)
	}
	left, err := exec.JobList(ctx, &driver.JobListParams{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != n-limit {
		t.Fatalf("%d jobs left, want %d", len(left), n-limit)
	}
	var maxID int64
	if err := d.DB().QueryRowContext(ctx, "SELECT MAX(id) FROM leasehold_job").Scan(&maxID); err != nil {
		t.Fatal(err)
	}
	for _, j := range left {
		if j.ID <= maxID-int64(n-limit) {
			t.Errorf("job %d survived, but older jobs were pruned before newer ones", j.ID)
		}
	}
}

// TestLimitLockLiteralKeys: LimitLock sends its keys as literals in one
// multi-statement round trip, so it works on a database opened without
// interpolateParams, keeps awkward names intact, and reports a bad scope.
func TestLimitLockLiteralKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	cfg, err := mysqldriver.ParseDSN(testDSN())
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DB().QueryRowContext(ctx, "SELECT DATABASE()").Scan(&cfg.DBName); err != nil {
		t.Fatal(err)
	}
	cfg.MultiStatements = true
	cfg.InterpolateParams = false
	own, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	exec := New(own).GetExecutor()

	keys := []driver.LimitKey{
		{Scope: driver.LimitScopeQueue, Name: `it's a "queue"\`},
		{Scope: driver.LimitScopeKind, Name: "kind ünïcode 🚀"},
		{Scope: driver.LimitScopeKind, Name: "trailing "},
	}
	tx, err := exec.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: keys})
	if err != nil {
		t.Fatalf("LimitLock: %v", err)
	}
	for i, r := range rows {
		if r.Key != keys[i] || r.WindowStart != nil || r.WindowCount != 0 || r.Now.IsZero() {
			t.Errorf("row %d = %+v, want key %+v, no window, a clock", i, *r, keys[i])
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	tx, err = exec.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // test cleanup
	if _, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{{Scope: "bogus", Name: "q"}}}); err == nil {
		t.Error("LimitLock with an unknown scope: no error")
	}
}
