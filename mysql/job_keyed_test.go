package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/driver"
)

// TestKeyedClaimReadsWhatItClaims counts the rows InnoDB reads for one
// keyed claim (the session's Handler_read counters, on a pinned
// connection), against 20,000 waiting jobs over 2,000 keys right after
// they were inserted (the table's statistics still those of an empty
// table): a claim of 10 with KeyLimit 1 and fairness, behind 50 keys at
// their limit, reads the keys it walks and their first jobs, not the
// backlog. Ranking every claimable job of the queue read more than the
// backlog; with the statistics of an empty table, a key's first job looked
// up on the claim index read the queue up to that job, and its running
// count read every running job of the queue.
func TestKeyedClaimReadsWhatItClaims(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	insert := func(n int, key func(int) string) {
		var params []*driver.JobInsertParams
		for i := range n {
			params = append(params, &driver.JobInsertParams{Kind: "k", Queue: "q", Priority: 1,
				EncodedArgs: []byte("{}"), Metadata: []byte("{}"), MaxAttempts: 5, Key: key(i)})
		}
		if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: params}); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
	insert(50, func(i int) string { return fmt.Sprintf("k%04d", i) })
	if got, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "q", Max: 50, Owner: "o", DefaultLeaseTTL: time.Hour}); err != nil || len(got) != 50 {
		t.Fatalf("claim the running jobs: %d, %v", len(got), err)
	}
	for range 4 {
		insert(5000, func(i int) string { return fmt.Sprintf("k%04d", i%2000) })
	}

	conn, err := d.DB().Conn(ctx)
	if err != nil {
		t.Fatalf("pin a connection: %v", err)
	}
	defer conn.Close()
	pinned := &executor{d: d, q: conn, onPool: true, conn: conn}
	before := handlerReads(t, conn)
	overhead := handlerReads(t, conn) - before
	start := before + overhead
	tx, err := pinned.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: "q"}}}); err != nil {
		t.Fatalf("lock: %v", err)
	}
	rows, err := tx.JobClaimKeyed(ctx, &driver.JobClaimKeyedParams{
		Claim: &driver.JobClaimParams{Queue: "q", Max: 10, Owner: "w", DefaultLeaseTTL: time.Hour}, KeyLimit: 1, Fair: true,
	})
	if err != nil {
		t.Fatalf("claim keyed: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	read := handlerReads(t, conn) - start - overhead
	if len(rows) != 10 {
		t.Fatalf("keyed claim of 10 took %d jobs", len(rows))
	}
	for _, r := range rows {
		if r.Key < "k0050" {
			t.Errorf("keyed claim took job %d of key %s, which has a job running (KeyLimit 1)", r.ID, r.Key)
		}
	}
	// 60 keys walked in a few batches of at most a few hundred index
	// entries, a few probes per key, 10 jobs locked, leased and read back.
	if read > 4000 {
		t.Fatalf("a keyed claim of 10 read %d rows (Handler_read_*) of a 20,000-job backlog, want at most 4,000", read)
	}
	t.Logf("a keyed claim of 10 read %d rows", read)
}

// handlerReads sums the session's Handler_read_* counters on conn.
func handlerReads(t *testing.T, conn *sql.Conn) int64 {
	t.Helper()
	rows, err := conn.QueryContext(t.Context(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatalf("read session status: %v", err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatalf("scan session status: %v", err)
		}
		if strings.HasPrefix(name, "Handler_read") {
			sum += n
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read session status: %v", err)
	}
	return sum
}
