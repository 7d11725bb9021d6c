package leasehold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// flowLimits are the fleet-wide limits that apply to one queue's claims on
// this client: the queue's own and those of the kinds this client works.
type flowLimits struct {
	queueLimit int            // 0: none
	rate       *RateLimit     // nil: none
	kindLimits map[string]int // GlobalLimit by kind; 0 for a kind with only a KeyLimit
	kinds      []string       // keys of kindLimits, sorted: the lock order

	// The per-key options. keyed sends every claim of the queue through
	// the keyed claim (driver.Executor.JobClaimKeyed).
	keyed         bool
	queueKeyLimit int
	keyRate       *RateLimit
	fair          bool
	kindKeyLimits map[string]int
	continueKinds []string // kinds with SequenceContinue
}

// limited reports whether claims need the locked, counted path.
func (f *flowLimits) limited() bool {
	return f != nil && (f.queueLimit > 0 || f.rate != nil || len(f.kindLimits) > 0 || f.keyed)
}

// oneKeyedStatement reports whether a limited claim is one keyed statement
// under the queue's limit row and nothing else: key options, but no
// GlobalLimit, no rate limit of either kind and no kind with a limit of its
// own (each needs a count, a window or a statement of its own).
func (f *flowLimits) oneKeyedStatement() bool {
	return f.keyed && f.queueLimit == 0 && f.rate == nil && f.keyRate == nil && len(f.kinds) == 0
}

// countsRunning reports whether a limited claim needs the running counts
// of the queue and its kinds: when a GlobalLimit applies.
func (f *flowLimits) countsRunning() bool {
	if f.queueLimit > 0 {
		return true
	}
	for _, l := range f.kindLimits {
		if l > 0 {
			return true
		}
	}
	return false
}

// newFlowLimits collects the limits of queue q on this client.
func newFlowLimits(q QueueConfig, workers map[string]*workerEntry) *flowLimits {
	f := &flowLimits{queueLimit: q.GlobalLimit, rate: q.RateLimit, kindLimits: map[string]int{},
		queueKeyLimit: q.KeyLimit, keyRate: q.KeyRateLimit, kindKeyLimits: map[string]int{}}
	f.fair = q.Fair || q.KeyLimit > 0 || q.KeyRateLimit != nil
	f.keyed = f.fair || q.Sequenced
	for kind, e := range workers {
		if e.opts.GlobalLimit > 0 || e.opts.KeyLimit > 0 {
			f.kindLimits[kind] = e.opts.GlobalLimit
			f.kinds = append(f.kinds, kind)
		}
		if e.opts.KeyLimit > 0 {
			f.kindKeyLimits[kind] = e.opts.KeyLimit
			f.keyed = true
		}
		if len(e.sequenceBy) > 0 || e.opts.SequencePolicy != "" {
			f.keyed = true
		}
		if e.opts.SequencePolicy == SequenceContinue {
			f.continueKinds = append(f.continueKinds, kind)
		}
	}
	slices.Sort(f.kinds)
	slices.Sort(f.continueKinds)
	return f
}

// keyedClaim holds what the keyed claims of one limited claim share: the
// rate window, and the starts recorded in it so far.
type keyedClaim struct {
	f      *flowLimits
	window *driver.KeyRateWindow
}

// claim runs one claim statement of a limited claim: the plain one, or the
// keyed one with kind's key limit (kind "" for the statement of the kinds
// without limits of their own), recording the starts in the key rate
// window.
func (k *keyedClaim) claim(ctx context.Context, tx driver.ExecutorTx, p *driver.JobClaimParams, kind string) ([]*leasetype.JobRow, error) {
	if !k.f.keyed {
		return tx.JobClaim(ctx, p)
	}
	rows, err := tx.JobClaimKeyed(ctx, k.params(p, kind))
	if err != nil || k.window == nil {
		return rows, err
	}
	starts := map[string]int64{}
	for _, r := range rows {
		if r.Key != "" {
			starts[r.Key]++
		}
	}
	if err := tx.KeyWindowAdd(ctx, &driver.KeyWindowAddParams{Window: *k.window, Starts: starts}); err != nil {
		return nil, fmt.Errorf("record key rate windows: %w", err)
	}
	return rows, nil
}

// params are the keyed claim statement's parameters for claim p of kind
// (see claim).
func (k *keyedClaim) params(p *driver.JobClaimParams, kind string) *driver.JobClaimKeyedParams {
	kp := &driver.JobClaimKeyedParams{
		Claim: p, KeyLimit: k.f.queueKeyLimit, KeyRate: k.window,
		Fair: k.f.fair, SequenceContinueKinds: k.f.continueKinds,
	}
	if kind != "" {
		kp.KindKeyLimit = k.f.kindKeyLimits[kind]
		kp.Fair = kp.Fair || kp.KindKeyLimit > 0
	}
	return kp
}

// claimResult is what one claim of a queue produced.
type claimResult struct {
	rows []*leasetype.JobRow
	// capped is set when a fleet-wide limit, not the free workers, bounded
	// the claim: jobs may be waiting that this claim was not allowed to take.
	capped bool
	// retryIn, when positive, is when a rate window opens again.
	retryIn time.Duration
}

// claimLimited claims up to limit jobs of a queue with fleet-wide limits, in
// one transaction: lock the limit rows (queue first, then kinds in name
// order, the same order on every client, so claimers never deadlock),
// count the running jobs with unexpired leases, claim what fits, record the
// rate window, commit. The next claimer's count runs after this commit, so
// it sees these jobs running: the limit holds under any concurrency.
func (c *clientCore) claimLimited(ctx context.Context, queue string, f *flowLimits, limit int) (claimResult, error) {
	for try := 1; ; try++ {
		res, err := c.claimLimitedOnce(ctx, queue, f, limit)
		if !errors.Is(err, errWindowPassed) || try == 3 {
			return res, err
		}
	}
}

// errWindowPassed reports a limited claim rolled back because a rate window
// ended while it ran (see inWindow); it is made again at once.
var errWindowPassed = errors.New("leasehold: a rate window ended during the claim")

// inWindow reports whether every claimed row's lease started within
// [start, start+period): the window its count was read and is recorded for.
// The database clock that dates a lease (a statement's, or on Postgres the
// transaction's start) is not the one the window was chosen by (read when
// the limit rows were locked); a claim delayed across the window's end, or
// a transaction that waited for the lock since the previous window, would
// otherwise spend one window's budget on starts dated in another, and the
// limit would not hold on the clock the attempts record.
func inWindow(rows []*leasetype.JobRow, start time.Time, period time.Duration) bool {
	end := start.Add(period)
	for _, r := range rows {
		if r.LeasedAt != nil && (r.LeasedAt.Before(start) || !r.LeasedAt.Before(end)) {
			return false
		}
	}
	return true
}

// claimLimitedOnce is one try of claimLimited.
func (c *clientCore) claimLimitedOnce(ctx context.Context, queue string, f *flowLimits, limit int) (res claimResult, err error) {
	// A queue at its limit is the common case while a backlog drains: look
	// first without taking the lock (a plain read), so that full claimers
	// do not queue on the limit row. The locked count below decides; this
	// one only skips rounds that could claim nothing.
	if f.queueLimit > 0 {
		counts, err := c.leaseExec.JobCountRunning(ctx, &driver.JobCountRunningParams{Queue: queue})
		if err == nil && counts.Queue >= int64(f.queueLimit) {
			return claimResult{capped: true}, nil
		}
	}
	if lk, ok := c.leaseExec.(driver.LockedKeyedClaimer); ok && f.oneKeyedStatement() {
		// Nothing to do between the lock, the claim and the commit: one
		// round trip.
		kc := &keyedClaim{f: f}
		rows, err := lk.JobClaimKeyedLocked(ctx,
			&driver.LimitLockParams{Keys: []driver.LimitKey{{Scope: driver.LimitScopeQueue, Name: queue}}},
			kc.params(c.claimParams(queue, limit), ""))
		if err != nil {
			return res, fmt.Errorf("limited claim: %w", err)
		}
		// A keyed claim that took less than it could may have skipped
		// jobs whose keys are full.
		return claimResult{rows: rows, capped: len(rows) < limit}, nil
	}
	tx, err := c.leaseExec.Begin(ctx)
	if err != nil {
		return res, fmt.Errorf("begin limited claim: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()

	var keys []driver.LimitKey
	if f.queueLimit > 0 || f.rate != nil || f.keyed {
		keys = append(keys, driver.LimitKey{Scope: driver.LimitScopeQueue, Name: queue})
	}
	for _, kind := range f.kinds {
		keys = append(keys, driver.LimitKey{Scope: driver.LimitScopeKind, Name: kind})
	}
	locked, err := tx.LimitLock(ctx, &driver.LimitLockParams{Keys: keys})
	if err != nil {
		return res, fmt.Errorf("lock limits: %w", err)
	}
	now := locked[0].Now

	// The rate window: fixed, epoch-aligned, on the database clock.
	var window time.Time
	var windowCount int64
	if f.rate != nil {
		window = epochTruncate(now, f.rate.Period)
		row := locked[0]
		if row.WindowStart != nil && row.WindowStart.Equal(window) {
			windowCount = row.WindowCount
		}
		if left := int64(f.rate.Limit) - windowCount; left < int64(limit) {
			limit = int(max(left, 0))
			res.capped = true
			res.retryIn = window.Add(f.rate.Period).Sub(now)
		}
	}

	kc := &keyedClaim{f: f}
	if r := f.keyRate; r != nil {
		start := epochTruncate(now, r.Period)
		kc.window = &driver.KeyRateWindow{
			Scope: driver.LimitKey{Scope: driver.LimitScopeQueue, Name: queue}, Limit: r.Limit,
			WindowStart: start, WindowEnd: start.Add(r.Period),
		}
	}

	// The running counts serve the global limits only: a queue with key
	// options alone (the keyed claim counts per key) skips the count, a
	// scan of every running job of the queue.
	held := &runningHeld{kinds: map[string]int64{}}
	if f.countsRunning() {
		if held, err = c.countHeld(ctx, tx, queue, f); err != nil {
			return res, err
		}
	}
	if f.queueLimit > 0 {
		if left := int64(f.queueLimit) - held.queue; left < int64(limit) {
			limit = int(max(left, 0))
			res.capped = true
		}
	}

	// Kinds with free slots are claimed one statement each, bounded by
	// their slots; the rest of the queue in one statement without them.
	base := c.claimParams(queue, 0)
	for _, kind := range f.kinds {
		if limit <= 0 {
			break
		}
		free := int64(limit) // a kind with only a KeyLimit
		if l := f.kindLimits[kind]; l > 0 {
			free = int64(l) - held.kinds[kind]
		}
		if free <= 0 {
			res.capped = true
			continue
		}
		p := *base
		p.Max, p.Kinds = int(min(free, int64(limit))), []string{kind}
		rows, err := kc.claim(ctx, tx, &p, kind)
		if err != nil {
			return res, err
		}
		if int64(len(rows)) == free || f.keyed && len(rows) < p.Max {
			// A keyed claim that took less than it could may have
			// skipped jobs whose keys are full.
			res.capped = true
		}
		res.rows = append(res.rows, rows...)
		limit -= len(rows)
	}
	if limit > 0 {
		p := *base
		p.Max, p.ExcludeKinds = limit, f.kinds
		rows, err := kc.claim(ctx, tx, &p, "")
		if err != nil {
			return res, err
		}
		if f.keyed && len(rows) < limit {
			res.capped = true
		}
		res.rows = append(res.rows, rows...)
	}
	if kc.window != nil && res.capped {
		// Jobs skipped for their key's rate may start when the window ends.
		if in := kc.window.WindowEnd.Sub(now); res.retryIn <= 0 || in < res.retryIn {
			res.retryIn = in
		}
	}

	if f.rate != nil && !inWindow(res.rows, window, f.rate.Period) || kc.window != nil && !inWindow(res.rows, kc.window.WindowStart, f.keyRate.Period) {
		return res, errWindowPassed
	}
	if f.rate != nil && len(res.rows) > 0 {
		err = tx.LimitSetWindow(ctx, &driver.LimitSetWindowParams{Key: keys[0], WindowStart: window, WindowCount: windowCount + int64(len(res.rows))})
		if err != nil {
			return res, fmt.Errorf("record rate window: %w", err)
		}
	}
	if err = tx.Commit(ctx); err != nil {
		return res, fmt.Errorf("commit limited claim: %w", err)
	}
	if len(held.expired) > 0 {
		c.onExpired(held.expired)
	}
	return res, nil
}

// runningHeld is what a limited claim counts against its global limits:
// the slots held in the queue and by each limited kind, and the leases it
// reclaimed to count them.
type runningHeld struct {
	queue   int64
	kinds   map[string]int64
	expired []*leasetype.JobRow // reclaimed in the claim's transaction
}

// countHeld counts the slots held in queue and by the limited kinds of f,
// in the limited claim's transaction tx, after its limit rows are locked.
//
// A running job holds its slot until its lease is reclaimed (JobExpire),
// not merely until the lease's expiry time passes: a renewal that checked
// the lease just before it expired may commit after this count, and would
// make the lease live again beside the jobs the count let this claim take
// (limit + 1 live leases). So when the count finds expired leases, the
// claim reclaims them itself: they are fenced (a new state and, when
// claimed again, a new token), a renewal that waits on one of their rows
// finds it gone, and the slot is free in this same claim. A lease the
// reclaim skips because another transaction holds its row (that renewal,
// or an outcome) keeps its slot: the count that follows reads every
// running job, expired or not.
func (c *clientCore) countHeld(ctx context.Context, tx driver.ExecutorTx, queue string, f *flowLimits) (*runningHeld, error) {
	params := &driver.JobCountRunningParams{Queue: queue, Kinds: f.kinds}
	counts, err := tx.JobCountRunning(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("count running jobs: %w", err)
	}
	held := &runningHeld{kinds: make(map[string]int64, len(f.kinds))}
	expire := &driver.JobExpireParams{Limit: claimExpireLimit, MaxExpiries: c.cfg.MaxExpiries}
	if f.queueLimit > 0 && counts.QueueExpired > 0 {
		expire.Queue = queue
	}
	for _, kind := range f.kinds {
		if f.kindLimits[kind] > 0 && counts.KindsExpired[kind] > 0 {
			expire.Kinds = append(expire.Kinds, kind)
		}
	}
	if expire.Queue != "" || len(expire.Kinds) > 0 {
		if held.expired, err = tx.JobExpire(ctx, expire); err != nil {
			return nil, fmt.Errorf("reclaim expired leases: %w", err)
		}
		if counts, err = tx.JobCountRunning(ctx, params); err != nil {
			return nil, fmt.Errorf("count running jobs: %w", err)
		}
	}
	held.queue = counts.Queue + counts.QueueExpired
	for _, kind := range f.kinds {
		held.kinds[kind] = counts.Kinds[kind] + counts.KindsExpired[kind]
	}
	return held, nil
}

// claimExpireLimit bounds the leases a limited claim reclaims (countHeld);
// any beyond it keep their slots until the next claim or the watcher.
const claimExpireLimit = 1000
