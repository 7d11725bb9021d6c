package sqlbackend

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// Lanes is a driver.ReservedExecutor on a few connections pinned from a
// *sql.DB (db.Conn): database/sql cannot build a second pool from a first,
// so the reserved connections are the user's pool's own, taken at open and
// kept until Close. Each call runs on a free lane, waiting for one when all
// are busy; a transaction from Begin holds its lane until Commit or
// Rollback. A lane whose connection failed, or that was idle for a second
// or more, is pinged before its next use and replaced (from db) when it is
// dead, as database/sql checks its pooled connections; a call that failed with
// driver.ErrBadConn, which means nothing was sent, is retried once on the
// replacement, as database/sql would on its pool.
//
// The embedded executor is the pool's: a method of driver.Executor that
// Lanes does not wrap runs there.
type Lanes struct {
	driver.Executor
	db *sql.DB
	on func(*sql.Conn) driver.Executor
	// free holds the lanes not in use; a caller owns the lane it took.
	free      chan *lane
	n         int
	closeOnce sync.Once
}

// lane is one pinned connection.
type lane struct {
	conn *sql.Conn // nil once closed as dead, until replaced
	// suspect is set after an error: the connection is pinged before its
	// next use.
	suspect bool
	// used is when the lane was last given back.
	used time.Time
}

var _ driver.ReservedExecutor = (*Lanes)(nil)

// pingTimeout bounds the check of a lane's connection.
const pingTimeout = 5 * time.Second

// pingIdle is how long a lane may be idle before it is pinged before use: a
// pinned connection never passes through database/sql's own checks, and
// the server may have closed it meanwhile (wait_timeout, a restart, KILL).
const pingIdle = time.Second

// OpenLanes pins n connections of db and returns the executor on them. pool
// is the executor on db's pool; on returns an executor on one connection,
// as the pool's behaves (its writes in transactions of their own).
func OpenLanes(ctx context.Context, db *sql.DB, n int, pool driver.Executor, on func(*sql.Conn) driver.Executor) (*Lanes, error) {
	l := &Lanes{Executor: pool, db: db, on: on, free: make(chan *lane, n), n: n}
	for i := range n {
		c, err := db.Conn(ctx)
		if err != nil {
			close(l.free)
			for ln := range l.free {
				ln.conn.Close() //nolint:errcheck // back to the pool either way
			}
			return nil, fmt.Errorf("pin reserved connection %d of %d: %w", i+1, n, err)
		}
		l.free <- &lane{conn: c, used: time.Now()}
	}
	return l, nil
}

// Close waits for every lane to be free, then gives the connections back to
// the pool.
func (l *Lanes) Close() {
	l.closeOnce.Do(func() {
		for range l.n {
			ln := <-l.free
			if ln.conn != nil {
				ln.conn.Close() //nolint:errcheck // back to the pool either way
			}
		}
	})
}

// acquire takes a free lane with a live connection.
func (l *Lanes) acquire(ctx context.Context) (*lane, error) {
	var ln *lane
	select {
	case ln = <-l.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if ln.conn != nil && (ln.suspect || time.Since(ln.used) >= pingIdle) {
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		err := ln.conn.PingContext(pctx)
		cancel()
		if err != nil {
			ln.conn.Close() //nolint:errcheck // dead: its replacement is what matters
			ln.conn = nil
		}
		ln.suspect = false
	}
	if ln.conn == nil {
		if err := l.replace(ctx, ln); err != nil {
			l.free <- ln
			return nil, err
		}
	}
	return ln, nil
}

// replace gives ln a new connection from db.
func (l *Lanes) replace(ctx context.Context, ln *lane) error {
	if ln.conn != nil {
		ln.conn.Close() //nolint:errcheck // dead: its replacement is what matters
		ln.conn = nil
	}
	c, err := l.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("reopen reserved connection: %w", err)
	}
	ln.conn, ln.suspect, ln.used = c, false, time.Now()
	return nil
}

// release gives ln back after a call that returned err.
func (l *Lanes) release(ln *lane, err error) {
	if err != nil {
		ln.suspect = true
	}
	ln.used = time.Now()
	l.free <- ln
}

// do runs fn on a lane's executor.
func (l *Lanes) do(ctx context.Context, fn func(e driver.Executor) error) error {
	ln, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	err = fn(l.on(ln.conn))
	if isBadConn(err) && ctx.Err() == nil {
		// Nothing was sent: retry once on a new connection.
		if err = l.replace(ctx, ln); err == nil {
			err = fn(l.on(ln.conn))
		}
	}
	l.release(ln, err)
	return err
}

// isBadConn reports whether err says the connection was unusable before
// anything was sent on it.
func isBadConn(err error) bool {
	return errors.Is(err, sqldriver.ErrBadConn) || errors.Is(err, sql.ErrConnDone)
}

// call runs fn on a lane's executor and returns its result.
func call[T any](ctx context.Context, l *Lanes, fn func(e driver.Executor) (T, error)) (T, error) {
	var out T
	err := l.do(ctx, func(e driver.Executor) error {
		var err error
		out, err = fn(e)
		return err
	})
	return out, err
}

// Begin starts a transaction on a lane, which it holds until the
// transaction ends.
func (l *Lanes) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	ln, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := l.on(ln.conn).Begin(ctx)
	if isBadConn(err) && ctx.Err() == nil {
		if err = l.replace(ctx, ln); err == nil {
			tx, err = l.on(ln.conn).Begin(ctx)
		}
	}
	if err != nil {
		l.release(ln, err)
		return nil, err
	}
	return &laneTx{ExecutorTx: tx, l: l, ln: ln}, nil
}

// laneTx is a transaction on a lane: its end gives the lane back.
type laneTx struct {
	driver.ExecutorTx
	l    *Lanes
	ln   *lane
	once sync.Once
}

func (t *laneTx) end(err error) { t.once.Do(func() { t.l.release(t.ln, err) }) }

// Commit commits the transaction and frees its lane.
func (t *laneTx) Commit(ctx context.Context) error {
	err := t.ExecutorTx.Commit(ctx)
	t.end(err)
	return err
}

// Rollback rolls the transaction back and frees its lane; after Commit it
// does nothing.
func (t *laneTx) Rollback(ctx context.Context) error {
	err := t.ExecutorTx.Rollback(ctx)
	if !errors.Is(err, driver.ErrClosed) {
		t.end(err)
	}
	return err
}

// Exec runs sql on a lane.
func (l *Lanes) Exec(ctx context.Context, sql string) error {
	return l.do(ctx, func(e driver.Executor) error { return e.Exec(ctx, sql) })
}

// Now reads the database clock on a lane.
func (l *Lanes) Now(ctx context.Context) (time.Time, error) {
	return call(ctx, l, func(e driver.Executor) (time.Time, error) { return e.Now(ctx) })
}

// JobInsertMany runs on a lane.
func (l *Lanes) JobInsertMany(ctx context.Context, p *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	return call(ctx, l, func(e driver.Executor) ([]*driver.JobInsertResult, error) { return e.JobInsertMany(ctx, p) })
}

// JobInsertFast runs on a lane.
func (l *Lanes) JobInsertFast(ctx context.Context, p *driver.JobInsertFastParams) (int, error) {
	return call(ctx, l, func(e driver.Executor) (int, error) { return e.JobInsertFast(ctx, p) })
}

// JobClaim runs on a lane.
func (l *Lanes) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.JobRow, error) { return e.JobClaim(ctx, p) })
}

// JobHeartbeat runs on a lane.
func (l *Lanes) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	return call(ctx, l, func(e driver.Executor) ([]int64, error) { return e.JobHeartbeat(ctx, p) })
}

// JobFinish runs on a lane.
func (l *Lanes) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	return call(ctx, l, func(e driver.Executor) ([]int64, error) { return e.JobFinish(ctx, p) })
}

// JobExpire runs on a lane.
func (l *Lanes) JobExpire(ctx context.Context, p *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.JobRow, error) { return e.JobExpire(ctx, p) })
}

// JobGet runs on a lane.
func (l *Lanes) JobGet(ctx context.Context, p *driver.JobGetParams) (*leasetype.JobRow, error) {
	return call(ctx, l, func(e driver.Executor) (*leasetype.JobRow, error) { return e.JobGet(ctx, p) })
}

// JobList runs on a lane.
func (l *Lanes) JobList(ctx context.Context, p *driver.JobListParams) ([]*leasetype.JobRow, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.JobRow, error) { return e.JobList(ctx, p) })
}

// JobAttempts runs on a lane.
func (l *Lanes) JobAttempts(ctx context.Context, p *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.AttemptRow, error) { return e.JobAttempts(ctx, p) })
}

// JobSetState runs on a lane.
func (l *Lanes) JobSetState(ctx context.Context, p *driver.JobSetStateParams) (*leasetype.JobRow, bool, error) {
	var changed bool
	row, err := call(ctx, l, func(e driver.Executor) (*leasetype.JobRow, error) {
		row, ch, err := e.JobSetState(ctx, p)
		changed = ch
		return row, err
	})
	return row, changed, err
}

// JobCountByState runs on a lane.
func (l *Lanes) JobCountByState(ctx context.Context) ([]*leasetype.QueueStateCount, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.QueueStateCount, error) { return e.JobCountByState(ctx) })
}

// JobThroughput runs on a lane.
func (l *Lanes) JobThroughput(ctx context.Context, p *driver.JobThroughputParams) ([]*leasetype.ThroughputCount, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.ThroughputCount, error) { return e.JobThroughput(ctx, p) })
}

// QueueBacklog runs on a lane.
func (l *Lanes) QueueBacklog(ctx context.Context) ([]*leasetype.QueueBacklog, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.QueueBacklog, error) { return e.QueueBacklog(ctx) })
}

// QueueSetPaused runs on a lane.
func (l *Lanes) QueueSetPaused(ctx context.Context, p *driver.QueueSetPausedParams) error {
	return l.do(ctx, func(e driver.Executor) error { return e.QueueSetPaused(ctx, p) })
}

// QueueList runs on a lane.
func (l *Lanes) QueueList(ctx context.Context) ([]*driver.QueueRow, error) {
	return call(ctx, l, func(e driver.Executor) ([]*driver.QueueRow, error) { return e.QueueList(ctx) })
}

// JobCountRunning runs on a lane.
func (l *Lanes) JobCountRunning(ctx context.Context, p *driver.JobCountRunningParams) (*driver.RunningCount, error) {
	return call(ctx, l, func(e driver.Executor) (*driver.RunningCount, error) { return e.JobCountRunning(ctx, p) })
}

// LimitLock runs on a lane. It must run in a transaction from Begin, whose
// executor runs it on the transaction's lane: on the lanes themselves it
// fails as it does on the pool.
func (l *Lanes) LimitLock(ctx context.Context, p *driver.LimitLockParams) ([]*driver.LimitRow, error) {
	return call(ctx, l, func(e driver.Executor) ([]*driver.LimitRow, error) { return e.LimitLock(ctx, p) })
}

// LimitSetWindow runs on a lane.
func (l *Lanes) LimitSetWindow(ctx context.Context, p *driver.LimitSetWindowParams) error {
	return l.do(ctx, func(e driver.Executor) error { return e.LimitSetWindow(ctx, p) })
}

// JobCancelRunning runs on a lane.
func (l *Lanes) JobCancelRunning(ctx context.Context, p *driver.JobCancelRunningParams) (*leasetype.JobRow, bool, error) {
	var running bool
	row, err := call(ctx, l, func(e driver.Executor) (*leasetype.JobRow, error) {
		row, r, err := e.JobCancelRunning(ctx, p)
		running = r
		return row, err
	})
	return row, running, err
}

// JobCancelRequested runs on a lane.
func (l *Lanes) JobCancelRequested(ctx context.Context, p *driver.JobCancelRequestedParams) ([]driver.LeaseRef, error) {
	return call(ctx, l, func(e driver.Executor) ([]driver.LeaseRef, error) { return e.JobCancelRequested(ctx, p) })
}

// JobPrune runs on a lane.
func (l *Lanes) JobPrune(ctx context.Context, p *driver.JobPruneParams) (int64, error) {
	return call(ctx, l, func(e driver.Executor) (int64, error) { return e.JobPrune(ctx, p) })
}

// AttemptPrune runs on a lane.
func (l *Lanes) AttemptPrune(ctx context.Context, p *driver.AttemptPruneParams) (int64, error) {
	return call(ctx, l, func(e driver.Executor) (int64, error) { return e.AttemptPrune(ctx, p) })
}

// LeaderAttempt runs on a lane.
func (l *Lanes) LeaderAttempt(ctx context.Context, p *driver.LeaderParams) (*driver.LeaderRow, error) {
	return call(ctx, l, func(e driver.Executor) (*driver.LeaderRow, error) { return e.LeaderAttempt(ctx, p) })
}

// LeaderResign runs on a lane.
func (l *Lanes) LeaderResign(ctx context.Context, p *driver.LeaderParams) error {
	return l.do(ctx, func(e driver.Executor) error { return e.LeaderResign(ctx, p) })
}

// PeriodicEnsure runs on a lane.
func (l *Lanes) PeriodicEnsure(ctx context.Context, p *driver.PeriodicEnsureParams) (*leasetype.PeriodicSchedule, error) {
	return call(ctx, l, func(e driver.Executor) (*leasetype.PeriodicSchedule, error) { return e.PeriodicEnsure(ctx, p) })
}

// PeriodicList runs on a lane.
func (l *Lanes) PeriodicList(ctx context.Context) ([]*leasetype.PeriodicSchedule, error) {
	return call(ctx, l, func(e driver.Executor) ([]*leasetype.PeriodicSchedule, error) { return e.PeriodicList(ctx) })
}

// PeriodicAdvance runs on a lane.
func (l *Lanes) PeriodicAdvance(ctx context.Context, p *driver.PeriodicAdvanceParams) (bool, error) {
	return call(ctx, l, func(e driver.Executor) (bool, error) { return e.PeriodicAdvance(ctx, p) })
}

// MigrationApplied runs on a lane.
func (l *Lanes) MigrationApplied(ctx context.Context) ([]int, error) {
	return call(ctx, l, func(e driver.Executor) ([]int, error) { return e.MigrationApplied(ctx) })
}

// MigrationRecord runs on a lane.
func (l *Lanes) MigrationRecord(ctx context.Context, p *driver.MigrationRecordParams) error {
	return l.do(ctx, func(e driver.Executor) error { return e.MigrationRecord(ctx, p) })
}
