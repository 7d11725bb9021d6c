package leasehold

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// producer claims jobs of one queue, as many as it has free workers, and
// starts them. It claims when woken (an insert on this client, a database
// notification, a job returned by the expirer, a worker freed while a
// backlog remains) and on every poll interval.
type producer struct {
	queue      string
	maxWorkers int
	flow       *flowLimits // fleet-wide limits; nil or empty when none
	wake       chan struct{}
	handlers   *handlerPool
	// jobNanos is a moving average of how long the queue's handlers run,
	// in nanoseconds (observeJob): how long gatherWait may hold a claim.
	jobNanos atomic.Int64
	// claimNanos is how long the loop's last claim took, from sending it
	// to its return, in nanoseconds: how long gatherWait spaces claims.
	claimNanos atomic.Int64

	mu      sync.Mutex
	running int
	// reserved is how many workers the claims in flight may fill: the
	// loop's own and those the completer sends with outcomes (claimAlong).
	reserved int
	// accepting is set while the loop runs: only then may the completer
	// claim for it. along counts the completer's claims in flight, which
	// the loop waits for before its handlers close; runCtx is the loop's
	// context, which ends them.
	accepting bool
	along     sync.WaitGroup
	runCtx    context.Context
	backlog   bool // the last claim was full or capped: more jobs are probably waiting
	// owed: a wake-up found no worker free and no claim of the loop's in
	// flight; the next job to end wakes the loop for the claim it asked
	// for, unless a claim starts before then (owe).
	owed    bool
	retryIn time.Duration // a rate window opens again after this; zero when not rate-capped
	// cursor is where the next claim may start (driver.JobClaimParams.After):
	// past the last job of the full claims since the claims last started
	// from the head. A job may become claimable behind it: one inserted
	// with a past schedule or a higher priority, one a failed claim let go,
	// one a claim in flight passed before its insert committed. So a claim
	// starts from the head after a claim that was not full, after a wake-up
	// that may concern such a job (an insert of this client that sorts
	// before the cursor, another client's insert while the cursor is past
	// the first priority, the expirer, an operator's action, a failed
	// claim, a reconnect), and at least once per poll interval.
	cursor    driver.ClaimPosition
	hasCursor bool
	fromHead  bool      // the next claim starts at the head
	headAt    time.Time // when the last claim from the head started
}

func newProducer(queue string, maxWorkers int, flow *flowLimits) *producer {
	return &producer{queue: queue, maxWorkers: maxWorkers, flow: flow, wake: make(chan struct{}, 1), handlers: newHandlerPool()}
}

// wakeup asks for a claim soon, which may start at the cursor: more of the
// backlog it is working through. It never blocks.
func (p *producer) wakeup() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// wakeupFromHead asks for a claim soon that starts at the head of the claim
// order: jobs may have become claimable anywhere. It never blocks.
func (p *producer) wakeupFromHead() {
	p.rewind()
	p.wakeup()
}

// rewind sends the next claim back to the head of the claim order.
func (p *producer) rewind() {
	p.mu.Lock()
	p.fromHead = true
	p.mu.Unlock()
}

// wakeupFor asks for a claim soon that finds a job at position at: from
// the head when at sorts before the cursor, else from the cursor. It never
// blocks.
func (p *producer) wakeupFor(at driver.ClaimPosition) {
	p.mu.Lock()
	if p.hasCursor && at.Compare(p.cursor) <= 0 {
		p.fromHead = true
	}
	p.mu.Unlock()
	p.wakeup()
}

// wakeupForNotice asks for a claim soon for another client's insert, of
// which the notification names only the queue. The inserted jobs sort after
// the cursor unless they have a higher priority than the cursor's job or a
// schedule in the past: the claim starts from the head when the cursor is
// past the first priority, and otherwise from the cursor (a job with a
// past schedule waits for the next claim from the head, within a poll
// interval).
func (p *producer) wakeupForNotice() {
	p.mu.Lock()
	if p.hasCursor && p.cursor.Priority > 1 {
		p.fromHead = true
	}
	p.mu.Unlock()
	p.wakeup()
}

// claimFrom returns where a claim starting at now starts: nil for the head.
// A cursor set longer than headEvery ago sends the claim to the head.
func (p *producer) claimFrom(now time.Time, headEvery time.Duration) *driver.ClaimPosition {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fromHead || !p.hasCursor || now.Sub(p.headAt) >= headEvery {
		p.fromHead, p.hasCursor, p.headAt = false, false, now
		return nil
	}
	at := p.cursor
	return &at
}

// advance moves the cursor past the jobs of a full claim, which come in
// claim order (driver.Executor.JobClaim), or sends the next claim back to
// the head after one that was not full. Claims that overlap may return in
// either order: the cursor only moves forward.
func (p *producer) advance(rows []*leasetype.JobRow, full bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !full || len(rows) == 0 {
		p.hasCursor = false
		return
	}
	if at := driver.PositionOf(rows[len(rows)-1]); !p.hasCursor || at.Compare(p.cursor) > 0 {
		p.cursor, p.hasCursor = at, true
	}
}

// free returns how many more jobs the producer may start beyond those the
// claims in flight may fill.
func (p *producer) free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxWorkers - p.running - p.reserved
}

// reserve counts n more workers as the claims in flight may fill.
func (p *producer) reserve(n int) {
	p.mu.Lock()
	p.reserved += n
	p.mu.Unlock()
}

// reserveClaim reserves n workers for a claim of the loop's that starts
// now: it makes the claim a wake-up was owed (owe), if any.
func (p *producer) reserveClaim(n int) {
	p.mu.Lock()
	p.reserved += n
	p.owed = false
	p.mu.Unlock()
}

// claimAlong reserves workers for a claim that the completer sends in the
// round trip of an outcome batch holding freeing of p's running jobs
// (driver.FinishClaimer): the free workers and those the batch frees. It
// returns 0, and reserves nothing, unless p's loop is running, its queue
// has no fleet-wide limits and its last claim was full (a backlog is
// probably waiting: a claim that finds nothing would only cost the
// database). A claim it reserved for ends with alongDone, and must end
// when the context it returns (the loop's) does.
func (p *producer) claimAlong(freeing int) (int, context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.accepting || !p.backlog || p.flow.limited() {
		return 0, nil
	}
	n := max(0, p.maxWorkers-p.running-p.reserved) + freeing
	if n <= 0 {
		return 0, nil
	}
	p.reserved += n
	p.owed = false // this claim starts after the wake-up that was owed one
	p.along.Add(1)
	return n, p.runCtx
}

// reserveWithInsert reserves up to n workers for the jobs an insert of
// this client leases to it (driver.LeasedInserter), and returns how many;
// 0, reserving nothing, unless p's loop is running, its queue has no
// fleet-wide limits, no backlog is waiting (the jobs inserted would
// otherwise pass it) and workers are free. A reservation ends with
// alongDone: the loop's handlers stay open until it has.
func (p *producer) reserveWithInsert(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.accepting || p.backlog || p.flow.limited() {
		return 0
	}
	n = min(n, p.maxWorkers-p.running-p.reserved)
	if n <= 0 {
		return 0
	}
	p.reserved += n
	p.along.Add(1)
	return n
}

// alongDone ends a claim that claimAlong or reserveWithInsert reserved n
// workers for.
func (p *producer) alongDone(n int) {
	p.reserve(-n)
	p.along.Done()
}

// accept opens p to the completer's claims while ctx, the loop's, lasts.
func (p *producer) accept(ctx context.Context) {
	p.mu.Lock()
	p.accepting, p.runCtx = true, ctx
	p.mu.Unlock()
}

// refuse closes p to the completer's claims and waits for those in flight
// (the loop's context has ended them).
func (p *producer) refuse() {
	p.mu.Lock()
	p.accepting, p.runCtx = false, nil
	p.mu.Unlock()
	p.along.Wait()
}

// add counts n more running jobs.
func (p *producer) add(n int) {
	p.mu.Lock()
	p.running += n
	p.mu.Unlock()
}

// claimed records whether the last claim was full (or capped by a
// fleet-wide limit), and when a rate window opens again.
func (p *producer) claimed(full bool, retryIn time.Duration) {
	p.mu.Lock()
	p.backlog = full
	p.retryIn = retryIn
	p.mu.Unlock()
}

// gatherWait is how long the loop holds a claim of free workers back to
// gather more into it, zero when it claims now. It waits only while the
// queue has a backlog (the last claim was full: the jobs claimed later
// would wait anyway) and jobs still run, until gatherFor(the handlers'
// mean run time) has passed since the last claim started, or sooner once
// a quarter of the workers are free and claimSpacing times the last
// claim's duration has passed. Queues with fleet-wide limits claim as
// before.
func (p *producer) gatherWait(free int, lastClaim time.Time) time.Duration {
	p.mu.Lock()
	backlog, running := p.backlog, p.running
	p.mu.Unlock()
	if !backlog || running == 0 || p.flow.limited() {
		return 0
	}
	gather := gatherFor(time.Duration(p.jobNanos.Load()))
	if free >= max(1, p.maxWorkers/4) {
		gather = min(gather, claimSpacing*time.Duration(p.claimNanos.Load()))
	}
	return max(0, gather-time.Since(lastClaim))
}

// gatherFor is the longest a claim of a queue with a backlog gathers freed
// workers when its handlers run for meanJob on average: half of that, but
// at least backlogGather and at most maxBacklogGather. Jobs end at about
// running/meanJob a second, so within half of meanJob about half of the
// running workers free up, and the quarter gatherWait waits for comes
// first whatever the machine's speed; the time bounds the wait when slots
// free later than their handlers end (outcomes still being written).
// Where handlers wait on a small pool of the application's, jobs end
// slowly, and the claims (each a transaction) would otherwise shrink with
// the rate at which they end.
func gatherFor(meanJob time.Duration) time.Duration {
	return min(maxBacklogGather, max(backlogGather, meanJob/2))
}

// observeJob adds a handler's run time to the queue's moving average
// (jobNanos), which weighs the last 16 or so jobs most.
func (p *producer) observeJob(d time.Duration) {
	for {
		old := p.jobNanos.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)/16
		}
		if p.jobNanos.CompareAndSwap(old, next) {
			return
		}
	}
}

// backlogGather and maxBacklogGather bound how long a claim of a queue
// with a backlog gathers freed workers (gatherFor). claimSpacing is the
// least time from one such claim's start to the next, in multiples of the
// last claim's duration: a claim that takes long shows a busy database,
// and fewer, larger claims cost it less a job. Without it (0), a claim would
// follow the last one's return at once whenever a quarter of the workers
// freed during that one, as where handlers end at the pace of a small pool
// of the application's: the payments bench (100 workers, pool 20) then
// claimed 28–30 jobs a claim instead of 35 and ran 0.6 more transactions
// per 100 jobs.
const (
	claimSpacing     = 2
	backlogGather    = 10 * time.Millisecond
	maxBacklogGather = 50 * time.Millisecond
)

// nextPoll is the wait before the next claim when nothing wakes the loop:
// the poll interval, or less when a rate window opens sooner, or a limited
// queue's slots may free on other clients (they cannot wake this one).
func (p *producer) nextPoll(poll time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.retryIn > 0 && p.retryIn < poll {
		return p.retryIn
	}
	return poll
}

// jobDone frees a worker and wakes the loop when a backlog remains or a
// claim is owed.
func (p *producer) jobDone() { p.jobsDone(1) }

// jobsDone frees n workers and wakes the loop when a backlog remains or a
// claim is owed.
func (p *producer) jobsDone(n int) {
	p.mu.Lock()
	p.running -= n
	wake := p.backlog || p.owed
	p.owed = false
	p.mu.Unlock()
	if wake {
		p.wakeup()
	}
}

// owe records that a wake-up found every worker busy or reserved and no
// claim of the loop's in flight: the next job to end wakes the loop,
// unless a claim that starts before then (the loop's, or one carried by
// outcomes, claimAlong) makes the claim owed. A claim in flight at the
// wake-up does not: it may have read the queue before the job woken for
// was there. Without it such a job would wait for the poll interval: one
// inserted while the workers are filled by jobs inserted leased
// (driver.LeasedInserter) or by a claim that was not full, or one that
// commits while outcomes carry a claim that finds nothing.
func (p *producer) owe() {
	p.mu.Lock()
	p.owed = true
	p.mu.Unlock()
}

// run is the claim loop; it returns when ctx ends, once the claims in
// flight have returned.
//
// A claim runs while the loop goes on: when enough workers free up during
// it (at least minOverlapClaim beyond those the claims in flight may fill),
// a second claim starts at once instead of after the first returns. One
// claim statement runs on one database process, and a backlog would
// otherwise wait on that one process while the database's other cores sit
// idle. Claims of a queue with fleet-wide limits never overlap.
//
// While the queue has a backlog, a claim gathers freed workers first
// (gatherWait): each claim is a transaction, and claiming the moment one
// worker frees would cost one per few jobs where handlers end slowly (long
// jobs, or handlers waiting on a small pool of the application's).
func (p *producer) run(ctx context.Context, c *clientCore) {
	p.handlers.open()
	// No job starts after the loop ends: the claims in flight return
	// first, then the pool's goroutines go as their jobs end.
	defer p.handlers.close()
	var claims sync.WaitGroup
	defer claims.Wait()
	p.accept(ctx)
	defer p.refuse()
	type claimDone struct{ err error }
	done := make(chan claimDone, maxClaimsInFlight)
	inFlight := 0 // the loop's claims in flight
	// deferred: a wake-up or poll found the workers reserved by claims in
	// flight; the claim it asked for is made when one of them returns.
	deferred := false
	poll := time.NewTimer(0)
	defer poll.Stop()
	gather := time.NewTimer(time.Hour) // ends a claim's gathering
	gather.Stop()
	defer gather.Stop()
	var lastClaim time.Time // when the loop's last claim started
	errWait := 50 * time.Millisecond
	for {
		// A claim that has returned is taken before anything else: select
		// picks at random among the cases ready, and with a wake-up ready
		// after every insert a returned claim (and the claim deferred until
		// it returns) would wait one cooldown after another.
		var (
			d        claimDone
			returned bool
		)
		select {
		case d = <-done:
			returned = true
		default:
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-gather.C:
			case <-poll.C:
				p.rewind()
			case d = <-done:
				returned = true
			}
		}
		if returned {
			inFlight--
			if d.err != nil {
				if ctx.Err() != nil {
					return
				}
				c.logger.Warn("leasehold: claim jobs", "queue", p.queue, "error", d.err)
				// Back off, but keep trying: the database may come back.
				sleepCtx(ctx, errWait)
				errWait = min(errWait*2, c.cfg.PollInterval)
				p.wakeupFromHead()
				continue
			}
			errWait = 50 * time.Millisecond
			if !deferred {
				continue
			}
		}
		deferred = false
		free := p.free()
		if inFlight == 0 && free > 0 {
			if wait := p.gatherWait(free, lastClaim); wait > 0 {
				gather.Reset(wait) // a job ending wakes the loop sooner
				continue
			}
		}
		started := false
		switch {
		case free > 0 && (inFlight == 0 || inFlight < maxClaimsInFlight && free >= minOverlapClaim && !p.flow.limited()):
			started = true
			limit := free
			inFlight++
			lastClaim = time.Now()
			p.reserveClaim(limit)
			claims.Add(1)
			go func() {
				defer claims.Done()
				err := c.claimAndStart(ctx, p, limit)
				// The claim gives its reservation back itself: a claim
				// that returns after the loop ended (the client stopping)
				// must not leave the workers reserved for a restart.
				p.reserve(-limit)
				done <- claimDone{err: err}
			}()
		case inFlight > 0:
			deferred = true
		default:
			p.owe()
		}
		if !poll.Stop() {
			select {
			case <-poll.C:
			default:
			}
		}
		poll.Reset(p.nextPoll(c.cfg.PollInterval))
		if started {
			// The cooldown spaces the starts of claims. The loop sleeps
			// only after starting one: a claim deferred until one in
			// flight returns, or until a worker frees, starts at once
			// then, as the cooldown since the last start has passed.
			sleepCtx(ctx, c.cfg.FetchCooldown)
		}
	}
}

// claimAndStart claims up to limit jobs of p's queue and starts each on one
// of the producer's handler goroutines.
//
// One statement claims them all: a claim scans the claim index from its
// head, past the entries of the jobs claimed before it that vacuum has not
// removed yet, so few large claims cost the database less per job than many
// small ones: two concurrent statements of half the size each drain about a
// sixth slower than one. The producer may overlap two claims instead, when
// enough workers free up while one runs. Claims of a queue with fleet-wide
// limits are one transaction (claimLimited).
func (c *clientCore) claimAndStart(ctx context.Context, p *producer, limit int) error {
	// The local lease deadline counts from before the claim was sent: the
	// database computed the lease's expiry at or after this moment.
	sentAt := time.Now()
	if p.flow.limited() {
		res, err := c.claimLimited(ctx, p.queue, p.flow, limit)
		if err != nil {
			return err
		}
		p.claimed(len(res.rows) == limit || res.capped, res.retryIn)
		c.startJobs(p, res.rows, sentAt)
		return nil
	}
	params := c.claimParams(p.queue, limit)
	params.After = p.claimFrom(sentAt, c.cfg.PollInterval)
	rows, err := c.claimConfirming(ctx, params)
	p.claimNanos.Store(int64(time.Since(sentAt)))
	if err != nil {
		p.advance(nil, false)
		return err
	}
	// The backlog flag is set before the jobs start, so that the first of
	// them to end already wakes the loop when the claim was full.
	p.claimed(len(rows) == limit, 0)
	p.advance(rows, len(rows) == limit)
	c.startJobs(p, rows, sentAt)
	return nil
}

// claimConfirming runs the claim params, carrying the confirmations of
// CompleteTx commits that wait (txConfirmer) when the executor reads attempt
// rows and claims in one round trip (driver.AttemptsClaimer): on a queue
// whose handlers complete in their own transactions, the reads that
// confirm them then cost no transaction of their own. A failed claim gives
// the confirmations back to the confirmer.
func (c *clientCore) claimConfirming(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	ac, ok := c.leaseExec.(driver.AttemptsClaimer)
	if !ok {
		return c.leaseExec.JobClaim(ctx, params)
	}
	confirms := c.confirmer.takeAlong(driver.MaxAttemptLeases)
	if len(confirms) == 0 {
		return c.leaseExec.JobClaim(ctx, params)
	}
	refs := leaseRefs(confirms)
	attempts, rows, err := ac.JobAttemptsAndClaim(ctx, &driver.JobAttemptsParams{Leases: refs}, params)
	if err != nil {
		c.confirmer.giveBack(confirms)
		return nil, err
	}
	landed := make([]bool, len(confirms))
	c.completer.landedOf(confirms, refs, attempts, landed)
	c.confirmer.settle(confirms, landed)
	return rows, nil
}

// startJobs counts claimed rows as running on p and starts their handlers.
// sentAt is when the claim was sent: the local lease deadline counts from
// there, since the database computed the expiry at or after it.
func (c *clientCore) startJobs(p *producer, rows []*leasetype.JobRow, sentAt time.Time) {
	p.add(len(rows))
	c.startCounted(p, rows, sentAt)
}

// startCounted is startJobs for rows already counted as running on p.
//
// The leases of a chunk of rows are allocated together, added to the lease
// set under one lock and handed to the handler goroutines together, so
// that a claim costs one allocation, one lock of the set and one look at
// the pool per chunk, not per job. A chunk's leases live as long as the
// longest of its jobs, as the postgres driver's rows do.
func (c *clientCore) startCounted(p *producer, rows []*leasetype.JobRow, sentAt time.Time) {
	if len(rows) == 0 {
		return
	}
	c.stats.claimed.Add(int64(len(rows)))
	work := c.runJob
	var (
		started  [handOffChunk]*lease
		replaced [handOffChunk]*lease
		// A claim's rows are mostly of one kind: a run of rows of one
		// kind looks its worker up once.
		kind  string
		entry *workerEntry
	)
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), handOffChunk)]
		rows = rows[len(chunk):]
		block := make([]lease, len(chunk))
		ls := started[:len(chunk)]
		for i, row := range chunk {
			if row.Kind != kind {
				kind, entry = row.Kind, c.workers[row.Kind]
			}
			l := &block[i]
			l.init(row, c.leaseTTL(row, entry), entry, sentAt)
			l.core, l.producer = c, p
			ls[i] = l
		}
		c.leases.addAll(ls, replaced[:])
		for i, old := range replaced[:len(ls)] {
			if old != nil && old.token == ls[i].token {
				// Another token means the older lease is simply stale,
				// fenced by the database; the same token means the
				// database forgot it.
				old.supersede(ls[i])
			}
			replaced[i] = nil
		}
		p.handlers.runAll(ls, work)
		clear(ls)
	}
}

// handOffChunk is how many of a claim's rows startCounted makes leases of
// and hands to the handler pool at a time.
const handOffChunk = 64

// maxClaimsInFlight is the most claims of one queue that run at once;
// minOverlapClaim is the fewest free workers that start a claim while
// another is in flight.
const (
	maxClaimsInFlight = 2
	minOverlapClaim   = 100
)

// claimParams builds the claim statement's parameters for a queue.
func (c *clientCore) claimParams(queue string, limit int) *driver.JobClaimParams {
	return &driver.JobClaimParams{
		Queue:           queue,
		Max:             limit,
		Owner:           c.owner,
		DefaultLeaseTTL: c.cfg.LeaseTTL,
		KindLeaseTTL:    c.kindTTL,
		StuckKinds:      c.stuckKinds,
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
