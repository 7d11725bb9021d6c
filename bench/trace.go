package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/mysql"
	"github.com/leasehold/leasehold/postgres"
	lhsqlite "github.com/leasehold/leasehold/sqlite"
)

// stmtTrace counts the lease statements a leasehold client sends through a
// traced driver: how many, how many rows each carried, and how long each
// took from call to return. It is the statement-level half of the profile
// (the CPU profile is the other): a queue that waits on the database shows
// here, not in pprof.
type stmtTrace struct {
	mu    sync.Mutex
	kinds map[string]*stmtStats
}

type stmtStats struct {
	rows  int64
	total time.Duration
	took  []time.Duration // each statement's: their count, p99 and max
}

func newStmtTrace() *stmtTrace { return &stmtTrace{kinds: map[string]*stmtStats{}} }

func (t *stmtTrace) record(kind string, rows int, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.kinds[kind]
	if s == nil {
		s = &stmtStats{}
		t.kinds[kind] = s
	}
	s.rows += int64(rows)
	s.total += d
	s.took = append(s.took, d)
}

// print writes one comment line per statement kind; wall is the time the
// traced engine was measured, for the share of it each kind kept busy.
func (t *stmtTrace) print(w io.Writer, label string, wall time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, kind := range []string{"claim", "insert leased", "finish", "finish+claim", "heartbeat", "attempts", "attempts+claim", "keyed claim", "limited tx"} {
		s := t.kinds[kind]
		if s == nil || len(s.took) == 0 {
			continue
		}
		n := len(s.took)
		slices.Sort(s.took)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		fmt.Fprintf(w, "#   %s %-12s statements %6d  rows/statement %7.1f  mean %7.2f ms  p99 %7.2f ms  max %8.2f ms  in flight %5.1f%% of %s\n",
			label, kind, n, float64(s.rows)/float64(n), ms(s.total)/float64(n),
			ms(s.took[n*99/100]), ms(s.took[n-1]), 100*s.total.Seconds()/wall.Seconds(), wall.Round(time.Millisecond))
	}
}

// tracedExecutor times the lease statements of the executor it wraps.
type tracedExecutor struct {
	driver.Executor
	t *stmtTrace
}

func (e tracedExecutor) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	start := time.Now()
	rows, err := e.Executor.JobClaim(ctx, p)
	e.t.record("claim", len(rows), time.Since(start))
	return rows, err
}

// Begin traces the transaction's keyed claims ("keyed claim") and the
// transaction from Begin to Commit ("limited tx", rows: the keyed claims'),
// which a client opens for a claim of a queue with fleet-wide limits.
func (e tracedExecutor) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	tx, err := e.Executor.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &tracedTx{ExecutorTx: tx, t: e.t, start: time.Now()}, nil
}

// tracedTx is a transaction of a traced executor.
type tracedTx struct {
	driver.ExecutorTx
	t     *stmtTrace
	start time.Time
	rows  int
}

func (tx *tracedTx) JobClaimKeyed(ctx context.Context, p *driver.JobClaimKeyedParams) ([]*leasetype.JobRow, error) {
	start := time.Now()
	rows, err := tx.ExecutorTx.JobClaimKeyed(ctx, p)
	tx.t.record("keyed claim", len(rows), time.Since(start))
	tx.rows += len(rows)
	return rows, err
}

func (tx *tracedTx) Commit(ctx context.Context) error {
	err := tx.ExecutorTx.Commit(ctx)
	tx.t.record("limited tx", tx.rows, time.Since(tx.start))
	return err
}

func (e tracedExecutor) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	start := time.Now()
	ids, err := e.Executor.JobFinish(ctx, p)
	e.t.record("finish", len(p.Items), time.Since(start))
	return ids, err
}

func (e tracedExecutor) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	start := time.Now()
	ids, err := e.Executor.JobHeartbeat(ctx, p)
	e.t.record("heartbeat", len(p.Leases), time.Since(start))
	return ids, err
}

// JobAttempts traces the read-back of many leases (CompleteTx commits
// confirmed, refused outcomes); rows are the leases named.
func (e tracedExecutor) JobAttempts(ctx context.Context, p *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	if len(p.Leases) == 0 {
		return e.Executor.JobAttempts(ctx, p)
	}
	start := time.Now()
	rows, err := e.Executor.JobAttempts(ctx, p)
	e.t.record("attempts", len(p.Leases), time.Since(start))
	return rows, err
}

// tracedLeasedInserter is a traced executor whose executor inserts jobs
// leased (driver.LeasedInserter): "insert leased" counts those inserts,
// rows: the jobs they leased.
type tracedLeasedInserter struct {
	tracedExecutor
	li driver.LeasedInserter
}

func (e tracedLeasedInserter) JobInsertLeased(ctx context.Context, i *driver.JobInsertManyParams, c *driver.JobClaimParams) ([]*driver.JobInsertResult, error) {
	start := time.Now()
	results, err := e.li.JobInsertLeased(ctx, i, c)
	leased := 0
	for _, r := range results {
		if r != nil && !r.UniqueSkipped && r.Job.State == leasetype.JobStateRunning {
			leased++
		}
	}
	e.t.record("insert leased", leased, time.Since(start))
	return results, err
}

// traceExecutor traces ex, keeping its LeasedInserter.
func traceExecutor(ex driver.Executor, t *stmtTrace) driver.Executor {
	traced := tracedExecutor{Executor: ex, t: t}
	if li, ok := ex.(driver.LeasedInserter); ok {
		return tracedLeasedInserter{tracedExecutor: traced, li: li}
	}
	return traced
}

// tracedFinishClaimer is a traced executor whose executor writes outcomes
// and claims in one round trip (driver.FinishClaimer). Each of the two
// statements is counted as its kind; "finish+claim" counts the round trips
// that carried both.
type tracedFinishClaimer struct {
	tracedReserved
	fc driver.FinishClaimer
}

func (e tracedFinishClaimer) JobFinishAndClaim(ctx context.Context, f *driver.JobFinishParams, c *driver.JobClaimParams) ([]int64, []*leasetype.JobRow, error) {
	start := time.Now()
	ids, rows, err := e.fc.JobFinishAndClaim(ctx, f, c)
	d := time.Since(start)
	e.t.record("finish", len(f.Items), d)
	e.t.record("claim", len(rows), d)
	e.t.record("finish+claim", len(f.Items)+len(rows), d)
	return ids, rows, err
}

// tracedBatcher is a tracedFinishClaimer whose executor also reads attempt
// rows and claims in one round trip (driver.AttemptsClaimer): the read is
// counted as "attempts", the claim as "claim", and "attempts+claim" counts
// the round trips that carried both.
type tracedBatcher struct {
	tracedFinishClaimer
	ac driver.AttemptsClaimer
}

func (e tracedBatcher) JobAttemptsAndClaim(ctx context.Context, a *driver.JobAttemptsParams, c *driver.JobClaimParams) ([]*leasetype.AttemptRow, []*leasetype.JobRow, error) {
	start := time.Now()
	found, rows, err := e.ac.JobAttemptsAndClaim(ctx, a, c)
	d := time.Since(start)
	e.t.record("attempts", len(a.Leases), d)
	e.t.record("claim", len(rows), d)
	e.t.record("attempts+claim", len(a.Leases)+len(rows), d)
	return found, rows, err
}

// tracedLockedBatcher is a tracedBatcher whose executor also runs a whole
// limited keyed claim in one round trip (driver.LockedKeyedClaimer): counted
// as a "keyed claim" and as a "limited tx".
type tracedLockedBatcher struct {
	tracedBatcher
	lk driver.LockedKeyedClaimer
}

func (e tracedLockedBatcher) JobClaimKeyedLocked(ctx context.Context, l *driver.LimitLockParams, p *driver.JobClaimKeyedParams) ([]*leasetype.JobRow, error) {
	start := time.Now()
	rows, err := e.lk.JobClaimKeyedLocked(ctx, l, p)
	d := time.Since(start)
	e.t.record("keyed claim", len(rows), d)
	e.t.record("limited tx", len(rows), d)
	return rows, err
}

// tracedReserved is a traced executor on a client's reserved connections.
type tracedReserved struct {
	tracedExecutor
	close func()
}

func (e tracedReserved) Close() { e.close() }

// traceReserved opens r's reserved executor and traces it: the lease
// statements run there, not on GetExecutor's.
func traceReserved(ctx context.Context, r driver.Reserver, p *driver.OpenReservedParams, t *stmtTrace) (driver.ReservedExecutor, error) {
	ex, err := r.OpenReserved(ctx, p)
	if err != nil {
		return nil, err
	}
	traced := tracedReserved{tracedExecutor: tracedExecutor{Executor: ex, t: t}, close: ex.Close}
	if fc, ok := ex.(driver.FinishClaimer); ok {
		tfc := tracedFinishClaimer{tracedReserved: traced, fc: fc}
		if ac, ok := ex.(driver.AttemptsClaimer); ok {
			tb := tracedBatcher{tracedFinishClaimer: tfc, ac: ac}
			if lk, ok := ex.(driver.LockedKeyedClaimer); ok {
				return tracedLockedBatcher{tracedBatcher: tb, lk: lk}, nil
			}
			return tb, nil
		}
		return tfc, nil
	}
	return traced, nil
}

// tracedPostgres is the Postgres driver with a traced executor; LISTEN/NOTIFY
// passes through (the embedded driver's ListenInserts).
type tracedPostgres struct {
	*postgres.Driver
	t *stmtTrace
}

func (d tracedPostgres) GetExecutor() driver.Executor {
	return traceExecutor(d.Driver.GetExecutor(), d.t)
}

// OpenReserved traces the client's reserved executor.
func (d tracedPostgres) OpenReserved(ctx context.Context, p *driver.OpenReservedParams) (driver.ReservedExecutor, error) {
	return traceReserved(ctx, d.Driver, p, d.t)
}

// tracedSQLite is the SQLite driver with a traced executor.
type tracedSQLite struct {
	*lhsqlite.Driver
	t *stmtTrace
}

func (d tracedSQLite) GetExecutor() driver.Executor {
	return traceExecutor(d.Driver.GetExecutor(), d.t)
}

// OpenReserved traces the client's reserved executor.
func (d tracedSQLite) OpenReserved(ctx context.Context, p *driver.OpenReservedParams) (driver.ReservedExecutor, error) {
	return traceReserved(ctx, d.Driver, p, d.t)
}

// tracedMySQL is the MySQL/MariaDB driver with a traced executor.
type tracedMySQL struct {
	*mysql.Driver
	t *stmtTrace
}

func (d tracedMySQL) GetExecutor() driver.Executor {
	return traceExecutor(d.Driver.GetExecutor(), d.t)
}

// OpenReserved traces the client's reserved executor.
func (d tracedMySQL) OpenReserved(ctx context.Context, p *driver.OpenReservedParams) (driver.ReservedExecutor, error) {
	return traceReserved(ctx, d.Driver, p, d.t)
}

// noticeCounter counts the insert notifications the bench's own engines send
// on Postgres (leasehold's channel and River's, in the bench schemas), on a
// LISTEN connection of its own. Other programs notifying on the same
// database (tests, say) are left out: a notification counts only when its
// sender's application_name is one of the bench pools' (prefix-...).
type noticeCounter struct {
	conn, lookup *pgx.Conn
	app          string // application_name prefix of the bench pools
	cancel       context.CancelFunc
	done         chan struct{}

	mu    sync.Mutex
	byPID map[uint32]int64
	ours  map[uint32]bool // senders looked up so far
}

// listenNotices starts counting the notifications of the leasehold and
// River engines of schema prefix prefix.
func listenNotices(ctx context.Context, url, prefix string) (*noticeCounter, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("notice counter: %w", err)
	}
	lookup, err := pgx.Connect(ctx, url)
	if err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("notice counter: %w", err)
	}
	for _, ch := range []string{"leasehold_insert", prefix + "_river.river_insert"} {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(ctx)
			lookup.Close(ctx)
			return nil, fmt.Errorf("notice counter: listen %s: %w", ch, err)
		}
	}
	lctx, cancel := context.WithCancel(context.Background())
	c := &noticeCounter{conn: conn, lookup: lookup, app: prefix + "-", cancel: cancel, done: make(chan struct{}),
		byPID: map[uint32]int64{}, ours: map[uint32]bool{}}
	go func() {
		defer close(c.done)
		for {
			n, err := conn.WaitForNotification(lctx)
			if err != nil {
				return
			}
			c.mu.Lock()
			c.byPID[n.PID]++
			c.mu.Unlock()
		}
	}()
	return c, nil
}

// take returns the bench engines' notifications since the last take.
func (c *noticeCounter) take(ctx context.Context) int64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	counts := c.byPID
	c.byPID = map[uint32]int64{}
	c.mu.Unlock()
	var n int64
	for pid, k := range counts {
		ours, known := c.ours[pid]
		if !known {
			var app string
			err := c.lookup.QueryRow(ctx, "SELECT application_name FROM pg_stat_activity WHERE pid = $1", int32(pid)).Scan(&app)
			ours = err == nil && strings.HasPrefix(app, c.app)
			c.ours[pid] = ours
		}
		if ours {
			n += k
		}
	}
	return n
}

func (c *noticeCounter) close() {
	if c == nil {
		return
	}
	c.cancel()
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.conn.Close(ctx)
	c.lookup.Close(ctx)
}
