package demo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/examples/payments/psp"
	"github.com/leasehold/leasehold/migrate"
)

// ErrFailed is wrapped by Run's error when the run ends with a payment lost,
// double-charged or still pending.
var ErrFailed = errors.New("demo: payments lost, double-charged or unsettled")

// ErrNotScratch is wrapped by Run's error when the database holds what is
// not the demo's: jobs in other queues, or a payments table of another
// shape. The demo never works or changes an application's data.
var ErrNotScratch = errors.New("demo: the database is not a scratch database")

// crashPoint is where a planned crash happens.
type crashPoint int

const (
	crashBeforePSP      crashPoint = iota + 1 // the PSP never sees the charge
	crashAfterAuthorize                       // authorized and checkpointed, never captured: between the stages
	crashAfterPSP                             // captured, but never recorded
)

// plan is the seeded fault plan: which payments trigger a crash or a pause
// the first time a worker reaches the point.
type plan struct {
	crash map[string]crashPoint
	pause map[string]bool
	fired sync.Map // payment ID → struct{}
}

func newPlan(cfg Config, ids []string) *plan {
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x9e3779b97f4a7c15))
	order := r.Perm(len(ids))
	p := &plan{crash: map[string]crashPoint{}, pause: map[string]bool{}}
	// Faults land in the middle of the run, where workers are busy.
	for _, i := range order {
		if i < len(ids)/10 || i > len(ids)*9/10 && len(ids) >= 20 {
			continue
		}
		switch {
		case len(p.crash) < cfg.Crashes:
			p.crash[ids[i]] = crashPoint(1 + r.IntN(3))
		case len(p.pause) < cfg.Pauses:
			p.pause[ids[i]] = true
		}
	}
	return p
}

// fire reports whether the fault planned for a payment should happen now:
// the first time only.
func (p *plan) fire(id string) bool {
	_, already := p.fired.LoadOrStore(id, struct{}{})
	return !already
}

// run is one demo run's state.
type run[TTx any] struct {
	cfg     Config
	d       driver.Driver[TTx]
	store   *payments.Store[TTx]
	psp     *psp.Server
	plan    *plan
	release chan struct{} // closed at the end: frozen handlers return
	// merchantLimit is the charge queue's per-merchant KeyRateLimit, nil
	// for none; callDeadline the workers' CallDeadline it relies on.
	merchantLimit *leasehold.RateLimit
	callDeadline  time.Duration
	// refund says which payments get a refund job after their creation.
	refund []bool

	mu      sync.Mutex
	nodes   []*node[TTx] // every worker client ever started
	nextID  int
	crashes atomic.Int64
	pauses  atomic.Int64
	// createRetries counts payment creations retried after an error.
	createRetries atomic.Int64
	// refundRequested is per payment: its refund job was inserted.
	refundRequested []atomic.Bool
	stopped         bool
	created         []atomic.Bool // per payment: its creation committed
}

// node is one worker client and its fault switches.
type node[TTx any] struct {
	name    string
	fd      *faultDriver[TTx]
	client  *leasehold.Client[TTx]
	charge  *payments.ChargeWorker[TTx]
	refund  *payments.RefundWorker[TTx]
	recon   *payments.Reconciler[TTx]
	payout  *payments.PayoutWorker[TTx]
	crashed atomic.Bool
}

// Run runs the demo on d, a driver on the database the store also uses. It
// applies the leasehold migrations and the payments schema first. It returns
// the summary, and an error wrapping ErrFailed when a payment was lost,
// double-charged or left pending.
func Run[TTx any](ctx context.Context, d driver.Driver[TTx], store *payments.Store[TTx], cfg Config) (*Summary, error) {
	cfg = cfg.withDefaults()
	if cfg.RunID == "" {
		cfg.RunID = fmt.Sprintf("s%d", cfg.Seed)
	}
	if _, err := migrate.New(d).Up(ctx); err != nil {
		return nil, fmt.Errorf("demo: migrate: %w", err)
	}
	if err := onlyDemoJobs(ctx, d.GetExecutor()); err != nil {
		return nil, err
	}
	if err := store.Setup(ctx); err != nil {
		return nil, fmt.Errorf("%w: a payments table of another shape exists (%v); run the demo on a scratch database: omit --database-url for a temporary SQLite file", ErrNotScratch, firstLine(err))
	}
	server, err := psp.Start(psp.Config{
		Seed: cfg.Seed, MinLatency: cfg.PSPLatency / 5, MaxLatency: cfg.PSPLatency,
		DeclineRate: cfg.DeclineRate, ErrorRate: cfg.PSPErrorRate, LostResponseRate: cfg.LostResponseRate,
		SlowRate: cfg.SlowRate, SlowDelay: 2 * cfg.PSPTimeout,
		MerchantRateLimit: cfg.MerchantRateLimit, MerchantRatePeriod: cfg.MerchantRatePeriod,
	})
	if err != nil {
		return nil, fmt.Errorf("demo: %w", err)
	}
	defer server.Close()

	ids := make([]string, cfg.Payments)
	for i := range ids {
		ids[i] = fmt.Sprintf("pay_%s_%06d", cfg.RunID, i+1)
	}
	r := &run[TTx]{cfg: cfg, d: d, store: store, psp: server, plan: newPlan(cfg, ids), release: make(chan struct{}),
		created: make([]atomic.Bool, len(ids)), refundRequested: make([]atomic.Bool, len(ids)),
		// An attempt's PSP calls are made within this of its start, or it
		// retries (a new start): the authorization's timeout and the
		// capture's, the checkpoint between them included.
		callDeadline: 2 * cfg.PSPTimeout}
	if cfg.MerchantRateLimit > 0 && !cfg.NoQueueRateLimit {
		if r.merchantLimit, err = payments.MerchantKeyRateLimit(cfg.MerchantRateLimit, cfg.MerchantRatePeriod, r.callDeadline); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
	}
	picks := rand.New(rand.NewPCG(uint64(cfg.Seed), 11))
	r.refund = make([]bool, len(ids))
	for i := range r.refund {
		r.refund[i] = picks.Float64() < cfg.Refunds
	}
	return r.run(ctx, ids)
}

// onlyDemoJobs refuses a database that holds jobs in queues other than the
// demo's, so that the demo's workers never claim an application's jobs and
// its summary never counts them.
func onlyDemoJobs(ctx context.Context, exec driver.Executor) error {
	counts, err := exec.JobCountByState(ctx)
	if err != nil {
		return fmt.Errorf("demo: count jobs: %w", err)
	}
	others := map[string]int64{}
	var total int64
	for _, c := range counts {
		if c.Queue != payments.ChargeQueue && c.Queue != payments.ReconcileQueue && c.Queue != payments.PayoutQueue && c.Count > 0 {
			others[c.Queue] += c.Count
			total += c.Count
		}
	}
	if total == 0 {
		return nil
	}
	queues := slices.Sorted(maps.Keys(others))
	if len(queues) > 3 {
		queues = append(queues[:3], "...")
	}
	return fmt.Errorf("%w: it holds %d jobs that are not the demo's (queues %s); run the demo on a scratch database: omit --database-url for a temporary SQLite file", ErrNotScratch, total, strings.Join(queues, ", "))
}

// firstLine is err's message up to its first newline.
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func (r *run[TTx]) run(ctx context.Context, ids []string) (*Summary, error) {
	start := time.Now()
	runCtx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()

	for range r.cfg.Workers {
		if err := r.startNode(runCtx); err != nil {
			r.stopAll()
			return nil, err
		}
	}
	inserter, err := leasehold.NewClient(r.d, &leasehold.Config{Logger: r.cfg.Logger})
	if err != nil {
		r.stopAll()
		return nil, fmt.Errorf("demo: %w", err)
	}
	var bg sync.WaitGroup

	createErr := make(chan error, 1)
	bg.Add(1)
	go func() {
		defer bg.Done()
		createErr <- r.create(runCtx, inserter, ids)
	}()

	prog := newProgress(r.cfg.Progress, r.cfg.Terminal, len(ids))
	waitErr := r.waitSettled(runCtx, createErr, prog, start)
	var batch *payments.PayoutBatch
	if waitErr == nil {
		// Every payment settled: pay the merchants out, as one graph.
		batch, waitErr = r.payOut(runCtx, inserter)
	}
	r.stopAll()
	bg.Wait()
	prog.done()

	sum, err := r.summarize(context.WithoutCancel(ctx), ids, batch, time.Since(start))
	if err != nil {
		return nil, err
	}
	if waitErr != nil {
		return sum, fmt.Errorf("%w: %w", ErrFailed, waitErr)
	}
	if !sum.OK() {
		return sum, fmt.Errorf("%w: %d lost, %d double-charged, %d double authorizations, %d double captures, %d pending, %d not created, payouts balanced %t, "+
			"%d refunds missing, %d double refunds, %d refunds before their charge finished, %d rate-limited PSP requests",
			ErrFailed, sum.Lost, sum.DoubleCharges, sum.DoubleAuthorizations, sum.DoubleCaptures, sum.Pending, sum.NotCreated, sum.PayoutsBalanced,
			sum.RefundsMissing, sum.DoubleRefunds, sum.EarlyRefunds, sum.RateLimited)
	}
	return sum, nil
}

// create creates the payments, each with its charge job in one transaction,
// from a few goroutines as an application's request handlers would.
func (r *run[TTx]) create(ctx context.Context, c *leasehold.Client[TTx], ids []string) error {
	amounts := rand.New(rand.NewPCG(uint64(r.cfg.Seed), 7))
	amount := make([]int64, len(ids))
	for i := range amount {
		amount[i] = 100 + amounts.Int64N(99_900)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				if err := r.createOne(ctx, c, payments.NewPayment{ID: ids[i], AmountCents: amount[i], Currency: "EUR",
					CustomerID: fmt.Sprintf("cust_%s_%05d", r.cfg.RunID, i%r.cfg.Customers), MerchantID: r.merchant(i % r.cfg.Merchants)}); err != nil {
					errs <- err
					return
				}
				r.created[i].Store(true)
				if r.refund[i] {
					if err := r.requestRefund(ctx, c, ids[i]); err != nil {
						errs <- err
						return
					}
					r.refundRequested[i].Store(true)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("demo: create payments: %w", err)
	}
	return ctx.Err()
}

// createOne creates one payment, retrying what may be transient (the
// database restarting, failing over or unreachable for a moment) with
// backoff until ctx ends, as an application's request handler would. A
// retry is safe: the payment's ID is the primary key and its charge job's
// unique key, so a creation whose commit was in fact applied is found by
// reading the payment back, never created twice.
func (r *run[TTx]) createOne(ctx context.Context, c *leasehold.Client[TTx], p payments.NewPayment) error {
	wait := 20 * time.Millisecond
	for {
		_, err := r.store.Create(ctx, c, p)
		if err == nil {
			return nil
		}
		if errors.Is(err, payments.ErrInvalidPayment) || ctx.Err() != nil {
			return err
		}
		if got, gerr := r.store.Get(ctx, p.ID); gerr == nil && got != nil {
			return nil // the commit was applied though it reported an error
		}
		r.createRetries.Add(1)
		if r.cfg.Logger != nil {
			r.cfg.Logger.Warn("demo: create payment failed; retrying", "payment", p.ID, "error", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// requestRefund enqueues a payment's refund right after its creation,
// retrying what may be transient as createOne does (the refund's unique
// key makes a retry safe). Its charge, inserted before it in the same
// customer's sequence, runs first.
func (r *run[TTx]) requestRefund(ctx context.Context, c *leasehold.Client[TTx], id string) error {
	wait := 20 * time.Millisecond
	for {
		_, err := r.store.RequestRefund(ctx, c, id)
		if err == nil || ctx.Err() != nil {
			return err
		}
		r.createRetries.Add(1)
		r.cfg.Logger.Warn("demo: request refund failed; retrying", "payment", id, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// chargeQueueBusy reports whether the charge queue still holds a job that
// is not finished (a refund, or a charge whose payment the reconciler
// settled first).
func (r *run[TTx]) chargeQueueBusy(ctx context.Context) bool {
	counts, err := r.d.GetExecutor().JobCountByState(ctx)
	if err != nil {
		return true
	}
	for _, c := range counts {
		if c.Queue == payments.ChargeQueue && c.Count > 0 && !c.State.Finalized() {
			return true
		}
	}
	return false
}

// waitSettled reports progress until every payment is settled and every
// refund done, creation failed, or ctx ends.
func (r *run[TTx]) waitSettled(ctx context.Context, createErr chan error, prog *progress, start time.Time) error {
	tick := time.NewTicker(prog.interval())
	defer tick.Stop()
	created := false
	for {
		counts, err := r.store.CountPrefix(ctx, "pay_"+r.cfg.RunID+"_")
		if err == nil {
			prog.update(counts, r.live(), time.Since(start))
			if created && counts.Pending == 0 && counts.Total == int64(r.cfg.Payments) && !r.chargeQueueBusy(ctx) {
				return nil
			}
		}
		select {
		case err := <-createErr:
			if err != nil {
				return err
			}
			created = true
		case <-ctx.Done():
			return fmt.Errorf("not settled within %s", r.cfg.Timeout)
		case <-tick.C:
		}
	}
}

// startNode starts a worker client, unless the run is stopping.
func (r *run[TTx]) startNode(ctx context.Context) error {
	n := &node[TTx]{}
	var wrapped driver.Driver[TTx]
	n.fd, wrapped = wrap(r.d)
	pspClient := psp.NewClient(r.psp.URL(), r.cfg.PSPTimeout)
	n.charge = &payments.ChargeWorker[TTx]{
		Store: r.store, PSP: pspClient, LeaseTTL: r.cfg.LeaseTTL, MaxAttempts: 25, CallDeadline: r.callDeadline,
		Retry: leasehold.ExponentialBackoff{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5},
		Hooks: &payments.Hooks{BeforeCharge: r.beforeCharge(n), AfterAuthorize: r.afterAuthorize(n), AfterCharge: r.afterCharge(n)},
	}
	n.refund = &payments.RefundWorker[TTx]{
		Store: r.store, PSP: pspClient, LeaseTTL: r.cfg.LeaseTTL, MaxAttempts: 25, CallDeadline: r.callDeadline,
		Retry: leasehold.ExponentialBackoff{Base: 50 * time.Millisecond, Max: time.Second, Jitter: 0.5}, UnsettledWait: 250 * time.Millisecond,
	}
	n.recon = &payments.Reconciler[TTx]{Store: r.store, PSP: pspClient, PendingAfter: r.cfg.PendingAfter, Logger: r.cfg.Logger}
	n.payout = &payments.PayoutWorker[TTx]{Store: r.store}
	ws := leasehold.NewWorkers()
	if err := payments.AddWorkers(ws, n.charge, n.recon); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := payments.AddRefundWorker(ws, n.refund); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := payments.AddPayoutWorkers(ws, n.payout); err != nil {
		return fmt.Errorf("demo: %w", err)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.nextID++
	n.name = fmt.Sprintf("worker-%d", r.nextID)
	c, err := leasehold.NewClient(wrapped, &leasehold.Config{
		ID: n.name, Workers: ws, LeaseTTL: r.cfg.LeaseTTL, Logger: r.cfg.Logger,
		PollInterval: 100 * time.Millisecond, WatcherInterval: 250 * time.Millisecond,
		// Every worker client may lead the reconciliation schedule; a crashed
		// leader is replaced within about the lease TTL.
		PeriodicJobs: []*leasehold.PeriodicJob{payments.ReconcilePeriodicJob(r.cfg.ReconcileEvery)},
		LeaderTTL:    r.cfg.LeaseTTL,
		// Charges and refunds: a customer's in insert order, one at a time;
		// each merchant's starts within the PSP's rate limit.
		Queues: map[string]leasehold.QueueConfig{payments.ChargeQueue: payments.ChargeQueueConfig(r.cfg.Concurrency, r.merchantLimit), payments.ReconcileQueue: {MaxWorkers: 1},
			payments.PayoutQueue: {MaxWorkers: 2}},
	})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("demo: start %s: %w", n.name, err)
	}
	n.client = c
	r.nodes = append(r.nodes, n)
	return nil
}

// live returns the counters shown while running.
func (r *run[TTx]) live() liveCounts {
	st := r.psp.Stats()
	lc := liveCounts{crashes: r.crashes.Load(), pauses: r.pauses.Load(), pspCharges: st.Charges}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range r.nodes {
		cs := n.client.Stats()
		lc.expiries += cs.Expired
		lc.fenced += cs.FencedWrites
		lc.reconciled += n.recon.Stats().Resolved()
	}
	return lc
}

// freeze blocks a handler of a crashed worker until the run ends: the
// process is gone, and so is everything it was doing.
func (r *run[TTx]) freeze() { <-r.release }

// crash kills a worker: its database calls fail from now on, its handlers
// freeze where they are, and a replacement starts.
func (r *run[TTx]) crash(ctx context.Context, n *node[TTx]) {
	if !n.crashed.CompareAndSwap(false, true) {
		return
	}
	n.fd.crash()
	r.crashes.Add(1)
	go func() {
		if err := r.startNode(context.WithoutCancel(ctx)); err != nil {
			r.cfg.Logger.Error("demo: start replacement worker", "error", err)
		}
	}()
}

func (r *run[TTx]) beforeCharge(n *node[TTx]) func(context.Context, *leasehold.Job[payments.ChargeArgs]) {
	return func(ctx context.Context, job *leasehold.Job[payments.ChargeArgs]) {
		id := job.Args.PaymentID
		if !n.crashed.Load() && r.plan.crash[id] == crashBeforePSP && r.plan.fire(id) {
			r.crash(ctx, n)
		}
		if n.crashed.Load() {
			r.freeze()
		}
	}
}

// afterAuthorize crashes a worker between the authorize and the capture
// stage: the authorization is checkpointed on the job, the capture never
// made. The retry resumes at the capture.
func (r *run[TTx]) afterAuthorize(n *node[TTx]) func(context.Context, *leasehold.Job[payments.ChargeArgs], *psp.Charge) {
	return func(ctx context.Context, job *leasehold.Job[payments.ChargeArgs], _ *psp.Charge) {
		id := job.Args.PaymentID
		if !n.crashed.Load() && r.plan.crash[id] == crashAfterAuthorize && r.plan.fire(id) {
			r.crash(ctx, n)
		}
		if n.crashed.Load() {
			r.freeze()
		}
	}
}

func (r *run[TTx]) afterCharge(n *node[TTx]) func(context.Context, *leasehold.Job[payments.ChargeArgs], *psp.Charge) {
	return func(ctx context.Context, job *leasehold.Job[payments.ChargeArgs], charge *psp.Charge) {
		id := job.Args.PaymentID
		point := r.plan.crash[id]
		if point == crashAfterAuthorize && charge.Status == psp.StatusDeclined {
			point = crashAfterPSP // a decline has no stage after the authorization
		}
		if !n.crashed.Load() && point == crashAfterPSP && r.plan.fire(id) {
			r.crash(ctx, n)
		}
		if n.crashed.Load() {
			r.freeze()
			return
		}
		if r.plan.pause[id] && r.plan.fire(id) {
			// A stop-the-world pause: the database hears nothing from this
			// lease for twice its TTL, then the worker carries on as if
			// nothing happened, and tries to record the charge.
			r.pauses.Add(1)
			n.fd.freeze(job.ID, true)
			select {
			case <-time.After(2*r.cfg.LeaseTTL + 500*time.Millisecond):
			case <-r.release:
			}
			n.fd.freeze(job.ID, false)
		}
	}
}

// stopAll stops every worker client: crashed ones are cut off already, so
// their frozen handlers are released to return without effect.
func (r *run[TTx]) stopAll() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	nodes := append([]*node[TTx](nil), r.nodes...)
	r.mu.Unlock()
	close(r.release)
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := n.client.StopAndCancel(ctx); err != nil && !errors.Is(err, leasehold.ErrNotStarted) {
				r.cfg.Logger.Warn("demo: stop worker", "worker", n.name, "error", err)
			}
		}()
	}
	wg.Wait()
}
