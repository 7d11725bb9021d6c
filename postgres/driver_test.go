package postgres

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/driver/drivertest"
	"github.com/leasehold/leasehold/internal/pgtest"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
)

// newSchemaPool creates a fresh, empty schema, dropped when the test ends,
// and returns a pool whose connections use it. It fails the test, never
// skips it, when the server cannot be reached.
func newSchemaPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return pgtest.Pool(t, "lh_", 12)
}

// newTestDriver returns a driver on a fresh, migrated schema.
func newTestDriver(t testing.TB) *Driver {
	t.Helper()
	d := New(newSchemaPool(t))
	if _, err := migrate.New(d).Up(t.Context()); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	return d
}

func TestConformance(t *testing.T) {
	drivertest.Exercise(t, drivertest.Backend[pgx.Tx]{
		New: func(t *testing.T) driver.Driver[pgx.Tx] { return newTestDriver(t) },
		BeginTx: func(ctx context.Context, d driver.Driver[pgx.Tx]) (pgx.Tx, error) {
			return d.(*Driver).Pool().Begin(ctx)
		},
		CommitTx:   func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		RollbackTx: func(ctx context.Context, tx pgx.Tx) error { return tx.Rollback(ctx) },
		NewSized: func(t *testing.T, conns int) driver.Driver[pgx.Tx] {
			return resized(t, newTestDriver(t), conns)
		},
		// A pool of its own on the same schema, as another process has.
		NewPeer: func(t *testing.T, d driver.Driver[pgx.Tx]) driver.Driver[pgx.Tx] {
			return resized(t, d.(*Driver), 4)
		},
		CompletionInJobRow: true,
	})
}

// insertJobs inserts n jobs into queue in one COPY.
func insertJobs(t *testing.T, exec driver.Executor, queue string, n int) {
	t.Helper()
	params := make([]*driver.JobInsertParams, n)
	for i := range params {
		params[i] = testJob(queue)
	}
	if got, err := exec.JobInsertFast(t.Context(), &driver.JobInsertFastParams{Jobs: params}); err != nil || got != n {
		t.Fatalf("JobInsertFast = %d, %v; want %d", got, err, n)
	}
}

func testJob(queue string) *driver.JobInsertParams {
	return &driver.JobInsertParams{
		Kind: "test", Queue: queue, Priority: 1,
		EncodedArgs: []byte(`{"n":1}`), Metadata: []byte(`{}`), MaxAttempts: 3,
	}
}

// TestHeartbeatIsHOT checks that renewing a lease touches no indexed column:
// every heartbeat is a heap-only tuple update.
func TestHeartbeatIsHOT(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	// One connection throughout: pg_stat_force_next_flush acts on the
	// calling backend's pending statistics only.
	conn, err := d.Pool().Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	defer conn.Release()
	exec := &executor{db: conn}

	if _, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob("hot")}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "hot", Max: 1, Owner: "w", DefaultLeaseTTL: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("claim = %d jobs, %v; want 1", len(jobs), err)
	}
	// updates waits until the statistics show at least min updates and
	// returns the update and HOT update counts.
	updates := func(min int64) (upd, hot int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := conn.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
				t.Fatalf("flush statistics: %v", err)
			}
			err := conn.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
				WHERE relid = 'leasehold_job'::regclass`).Scan(&upd, &hot)
			if err != nil {
				t.Fatalf("read statistics: %v", err)
			}
			if upd >= min {
				return upd, hot
			}
			if time.Now().After(deadline) {
				t.Fatalf("statistics show %d updates, want at least %d", upd, min)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	upd0, hot0 := updates(1) // the claim

	const beats = 5
	lease := driver.LeaseRenewal{ID: jobs[0].ID, Token: jobs[0].LeaseToken, TTL: time.Minute}
	for range beats {
		ids, err := exec.JobHeartbeat(ctx, &driver.JobHeartbeatParams{Owner: "w", Leases: []driver.LeaseRenewal{lease}})
		if err != nil || len(ids) != 1 {
			t.Fatalf("heartbeat = %v, %v; want the job renewed", ids, err)
		}
	}
	upd1, hot1 := updates(upd0 + beats)
	if upd1-upd0 != beats || hot1-hot0 != beats {
		t.Fatalf("after %d heartbeats: %d updates, %d of them HOT; want all HOT", beats, upd1-upd0, hot1-hot0)
	}
}

// claimLedger records which owner claimed each job. It fails the test on a
// job claimed twice and on a claim that is not the job's first lease.
type claimLedger struct {
	mu     sync.Mutex
	owners map[int64]string
}

func newClaimLedger() *claimLedger { return &claimLedger{owners: map[int64]string{}} }

func (l *claimLedger) record(t *testing.T, owner string, jobs []*leasetype.JobRow) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, j := range jobs {
		if prev, ok := l.owners[j.ID]; ok {
			t.Errorf("job %d claimed by %s and %s", j.ID, prev, owner)
		}
		l.owners[j.ID] = owner
		if j.LeaseToken != 1 || j.Attempt != 1 || j.LeaseOwner != owner || j.State != leasetype.JobStateRunning {
			t.Errorf("job %d: token %d, attempt %d, owner %q, state %s; want 1, 1, %q, running", j.ID, j.LeaseToken, j.Attempt, j.LeaseOwner, j.State, owner)
		}
	}
}

// count returns how many distinct jobs were claimed.
func (l *claimLedger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.owners)
}

// TestClaimByAddressUnderConcurrentUpdates claims while other transactions
// keep rewriting claimable rows (a new row version each, the job still
// claimable). The claim updates the rows it locked by their address, and a
// row rewritten after the claim's snapshot is locked in a version the
// update cannot see: such a row must be left claimable, never claimed twice
// and never lost. Every job is claimed exactly once, with token 1.
func TestClaimByAddressUnderConcurrentUpdates(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()

	const total, claimers = 3000, 4
	insertJobs(t, exec, "rewritten", total)

	stop := make(chan struct{})
	var rewriters sync.WaitGroup
	var rewrites atomic.Int64
	for range 2 {
		rewriters.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Rewrite the next claimable rows in claim order, where the
				// claimers are about to look.
				tag, err := d.Pool().Exec(ctx, `
					UPDATE leasehold_job SET metadata = metadata
					WHERE id IN (SELECT id FROM leasehold_job
						WHERE state = 'available' AND queue = 'rewritten'
						ORDER BY priority, scheduled_at, id LIMIT 20 FOR UPDATE SKIP LOCKED)`)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("rewrite: %v", err)
					}
					return
				}
				rewrites.Add(tag.RowsAffected())
			}
		})
	}

	var (
		claimed = newClaimLedger()
		wg      sync.WaitGroup
	)
	for w := range claimers {
		owner := fmt.Sprintf("claimer-%d", w)
		wg.Go(func() {
			for empty := 0; empty < 3; {
				jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "rewritten", Max: 50, Owner: owner, DefaultLeaseTTL: time.Minute})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(jobs) == 0 {
					empty++
					time.Sleep(5 * time.Millisecond)
					continue
				}
				claimed.record(t, owner, jobs)
			}
		})
	}
	wg.Wait()
	close(stop)
	rewriters.Wait()

	// What the claimers left behind while rows were being rewritten is
	// still claimable.
	for {
		jobs, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "rewritten", Max: 500, Owner: "last", DefaultLeaseTTL: time.Minute})
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if len(jobs) == 0 {
			break
		}
		claimed.record(t, "last", jobs)
	}
	if n := claimed.count(); n != total {
		t.Fatalf("claimed %d distinct jobs, want %d", n, total)
	}
	if rewrites.Load() == 0 {
		t.Fatal("no row was rewritten while the claimers ran")
	}
	t.Logf("%d row versions rewritten during the claims", rewrites.Load())
}

// TestClaimAfterPosition: a claim given a position takes only the jobs
// after it in claim order (priority, scheduled time, ID), and one without
// takes from the head.
func TestClaimAfterPosition(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	var params []*driver.JobInsertParams
	for i, spec := range []struct {
		priority int
		offset   time.Duration
	}{{2, 0}, {1, time.Minute}, {1, 0}, {2, time.Minute}, {1, 0}, {3, 0}} {
		p := testJob("positions")
		p.Priority = spec.priority
		p.ScheduledAt = ptrTo(base.Add(spec.offset))
		p.EncodedArgs = []byte(fmt.Sprintf(`{"n":%d}`, i))
		params = append(params, p)
	}
	res, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: params})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	order := make([]*leasetype.JobRow, len(res))
	for i, r := range res {
		order[i] = r.Job
	}
	slices.SortFunc(order, func(a, b *leasetype.JobRow) int { return driver.PositionOf(a).Compare(driver.PositionOf(b)) })

	after := driver.PositionOf(order[2])
	got, err := exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "positions", Max: 10, Owner: "w", DefaultLeaseTTL: time.Minute, After: &after})
	if err != nil {
		t.Fatalf("claim after: %v", err)
	}
	if ids, want := jobIDs(got), jobIDs(order[3:]); !slices.Equal(ids, want) {
		t.Fatalf("claim after the third job took %v, want %v in claim order", ids, want)
	}
	got, err = exec.JobClaim(ctx, &driver.JobClaimParams{Queue: "positions", Max: 10, Owner: "w", DefaultLeaseTTL: time.Minute})
	if err != nil {
		t.Fatalf("claim from the head: %v", err)
	}
	if ids, want := jobIDs(got), jobIDs(order[:3]); !slices.Equal(ids, want) {
		t.Fatalf("claim from the head took %v, want %v", ids, want)
	}
}

func jobIDs(jobs []*leasetype.JobRow) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func ptrTo[T any](v T) *T { return &v }

func TestInsertFast(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()

	later := time.Now().Add(time.Hour)
	scheduled := testJob("fast")
	scheduled.ScheduledAt = &later
	withTTL := testJob("fast")
	withTTL.LeaseTTL = 3 * time.Second
	n, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{testJob("fast"), withTTL, scheduled}})
	if err != nil || n != 3 {
		t.Fatalf("JobInsertFast = %d, %v; want 3", n, err)
	}
	counts, err := exec.JobCountByState(ctx)
	if err != nil {
		t.Fatalf("count: %v", err)
	}
	got := map[leasetype.JobState]int64{}
	for _, c := range counts {
		got[c.State] += c.Count
	}
	if got[leasetype.JobStateAvailable] != 2 || got[leasetype.JobStateScheduled] != 1 {
		t.Fatalf("counts = %v; want 2 available, 1 scheduled", got)
	}
	jobs, err := exec.JobList(ctx, &driver.JobListParams{Queue: "fast"})
	if err != nil || len(jobs) != 3 {
		t.Fatalf("list = %d jobs, %v; want 3", len(jobs), err)
	}
	var ttls []time.Duration
	for _, j := range jobs {
		ttls = append(ttls, j.LeaseTTL)
		if string(j.EncodedArgs) != `{"n": 1}` && string(j.EncodedArgs) != `{"n":1}` {
			t.Errorf("job %d args = %s", j.ID, j.EncodedArgs)
		}
	}
	if !slices.Contains(ttls, 3*time.Second) {
		t.Errorf("lease TTLs = %v; want one of 3s", ttls)
	}

	keyed := testJob("fast")
	keyed.UniqueKey = "k"
	if _, err := exec.JobInsertFast(ctx, &driver.JobInsertFastParams{Jobs: []*driver.JobInsertParams{keyed}}); err == nil {
		t.Fatalf("JobInsertFast took a job with a unique key")
	}
}

// TestInsertUniqueBatchesNoDeadlock inserts batches holding the same unique
// keys in opposite orders from many goroutines at once. Inserting in key
// order keeps the batches from waiting on each other in a cycle.
func TestInsertUniqueBatchesNoDeadlock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := newTestDriver(t)
	exec := d.GetExecutor()

	// Enough keys that the batches overlap in time.
	var keys []string
	for k := range 2000 {
		keys = append(keys, fmt.Sprintf("key-%04d", k))
	}
	const inserters = 8
	errs := make([]error, inserters)
	byKey := make([]map[string]int64, inserters)
	// Open the connections up front so that the batches start together.
	var conns []*pgxpool.Conn
	for range inserters {
		c, err := d.Pool().Acquire(ctx)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i := range inserters {
		order := slices.Clone(keys)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		params := make([]*driver.JobInsertParams, len(order))
		for k, key := range order {
			params[k] = testJob("batches")
			params[k].UniqueKey = key
		}
		wg.Go(func() {
			<-start
			res, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: params})
			if err != nil {
				errs[i] = err
				return
			}
			byKey[i] = map[string]int64{}
			for k, r := range res {
				if r.Job.UniqueKey != order[k] {
					errs[i] = fmt.Errorf("result %d has key %q, want %q", k, r.Job.UniqueKey, order[k])
					return
				}
				byKey[i][order[k]] = r.Job.ID
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("inserter %d: %v", i, err)
		}
		if !maps.Equal(byKey[i], byKey[0]) {
			t.Fatalf("inserter %d saw jobs %v, inserter 0 saw %v", i, byKey[i], byKey[0])
		}
	}
}

// TestListenInserts checks that a committed insert wakes the listener and a
// rolled-back one does not. Notifications are delivered in commit order, so
// the rolled-back queue must not show up before the committed one. Other
// tests notify on the same database, hence the random queue names.
func TestListenInserts(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rolledBack, committed := "rolled-back-"+rand.Text(), "committed-"+rand.Text()

	ready := make(chan struct{})
	got := make(chan string, 100)
	done := make(chan error, 1)
	go func() {
		done <- d.ListenInserts(ctx, func() { close(ready) }, func(n driver.InsertNotice) { got <- n.Queue })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ListenInserts returned before listening: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("ListenInserts never became ready")
	}

	tx, err := d.GetExecutor().Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := tx.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob(rolledBack)}}); err != nil {
		t.Fatalf("insert in tx: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if _, err := d.GetExecutor().JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: []*driver.JobInsertParams{testJob(committed), testJob(committed)}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	deadline := time.After(10 * time.Second)
	for waiting := true; waiting; {
		select {
		case q := <-got:
			switch q {
			case rolledBack:
				t.Fatalf("notified for queue %q, whose insert was rolled back", q)
			case committed:
				waiting = false
			}
		case <-deadline:
			t.Fatal("no notification after a committed insert")
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ListenInserts after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenInserts did not return after cancel")
	}
}
