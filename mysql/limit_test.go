package mysql

import (
	"database/sql"
	"errors"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/leasehold/leasehold/driver"
)

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
