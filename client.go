package leasehold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/leasetype"
)

// Client inserts jobs and, when started with workers, works them. TTx is the
// driver's transaction type (pgx.Tx for package postgres, *sql.Tx for
// package sqlite), taken by the transactional methods.
type Client[TTx any] struct {
	core   *clientCore
	driver driver.Driver[TTx]
}

// Start begins working jobs: it starts a claim loop per queue, the
// heartbeater, the completer, the expirer and, when the database can
// push them, insert notifications. Jobs run until Stop or StopAndCancel;
// ctx only bounds start-up.
func (c *Client[TTx]) Start(ctx context.Context) error { return c.core.start(ctx) }

// Stop stops the client gracefully: it stops claiming, waits for running
// handlers to return and their outcomes to be written, then stops the
// background services. If ctx ends first, the remaining handlers' contexts
// are cancelled (cause ErrClientStopping), Stop waits for them to return,
// and returns ctx's error. Jobs claimed but not yet started are released,
// not failed.
func (c *Client[TTx]) Stop(ctx context.Context) error { return c.core.stop(ctx) }

// StopAndCancel cancels every running handler's context at once (cause
// ErrClientStopping) and then stops like Stop. Interrupted handlers' errors
// are recorded as failed attempts and retried as usual.
func (c *Client[TTx]) StopAndCancel(ctx context.Context) error { return c.core.stopAndCancel(ctx) }

// clientCore is the part of the client that does not depend on the
// transaction type: the lease machinery.
type clientCore struct {
	cfg  *Config
	exec driver.Executor
	// reserver, when the driver offers it, opens leaseExec's reserved
	// connections at start.
	reserver driver.Reserver
	// leaseExec runs the lease machinery's statements (claims, renewals,
	// outcome writes, expiries, the cancellation poll): while started, on
	// connections reserved from reserver (reserved, closed at stop);
	// otherwise, and when the driver cannot reserve, exec.
	leaseExec  driver.Executor
	reserved   driver.ReservedExecutor
	notifier   driver.Notifier // nil when the driver cannot push wake-ups
	ownNotices *ownNotices     // with notifier: the notifications of this client's inserts
	logger     *slog.Logger
	owner      string
	workers    map[string]*workerEntry
	kindTTL    map[string]time.Duration
	stuckKinds []string
	client     any // the *Client[TTx], for ClientFromContext

	middleware middlewares
	leases     *leaseSet
	completer  *completer
	confirmer  *txConfirmer // confirms CompleteTx commits
	stats      statsCounters
	producers  map[string]*producer
	events     *eventHub // Subscribe's subscriptions
	// registrar keeps this client's registry row while started (nil when
	// Config.RegistryInterval is negative); stop removes the row.
	registrar *maintenance.ClientRegistrar

	mu       sync.Mutex // guards started and the run state below
	started  bool
	stopping atomic.Bool
	// handlerBase parents every handler's context and carries the client
	// (ClientFromContext). It is never cancelled: each handler's context is
	// cancelled through its lease, and interruptHandlers cancels them all,
	// so that starting a job does not register it with a shared parent.
	handlerBase context.Context
	interrupted atomic.Bool // interruptHandlers was called since Start
	// claimCancel stops the producers, serviceCancel the other services.
	claimCancel, serviceCancel context.CancelFunc
	claimWG, serviceWG         sync.WaitGroup
}

// NewClient returns a client on d. config may be nil for an insert-only
// client with defaults; it is copied, never changed.
func NewClient[TTx any](d driver.Driver[TTx], config *Config) (*Client[TTx], error) {
	if d == nil {
		return nil, fmt.Errorf("%w: driver is nil", ErrInvalidConfig)
	}
	cfg, err := config.withDefaults()
	if err != nil {
		return nil, err
	}
	mw, err := newMiddlewares(cfg.Middleware)
	if err != nil {
		return nil, err
	}
	core := &clientCore{
		cfg:        cfg,
		exec:       d.GetExecutor(),
		logger:     cfg.Logger,
		owner:      ownerID(cfg.ID),
		middleware: mw,
		workers:    map[string]*workerEntry{},
		kindTTL:    map[string]time.Duration{},
		leases:     newLeaseSet(),
		producers:  map[string]*producer{},
	}
	if r, ok := any(d).(driver.Reserver); ok && cfg.ReservedConns >= 0 {
		core.reserver = r
	}
	if n, ok := driver.NotifierOf(d); ok {
		core.notifier = n
		core.ownNotices = newOwnNotices(func(queue string) bool { return core.producers[queue] != nil })
	}
	if cfg.Workers != nil {
		for kind, e := range cfg.Workers.byKind {
			core.workers[kind] = e
			if e.opts.LeaseTTL > 0 {
				core.kindTTL[kind] = e.opts.LeaseTTL
			}
			policy := e.opts.ExpiryPolicy
			if policy == "" {
				policy = cfg.ExpiryPolicy
			}
			if policy == leasetype.ExpiryStuck {
				core.stuckKinds = append(core.stuckKinds, kind)
			}
		}
		sort.Strings(core.stuckKinds)
		for name, q := range cfg.Queues {
			core.producers[name] = newProducer(name, q.MaxWorkers, newFlowLimits(q, core.workers))
		}
	}
	core.events = newEventHub(&core.stats.eventsDropped)
	core.completer = newCompleter(core.exec, core.owner, &sync.RWMutex{}, cfg.CompleterMaxBatch, cfg.Logger, &core.stats)
	core.useLeaseExec(core.exec)
	core.confirmer = newTxConfirmer(core.completer, cfg.Logger, core.leases.count, core.completeTxNotCommitted)
	c := &Client[TTx]{core: core, driver: d}
	core.client = c
	return c, nil
}

// Driver returns the client's driver.
func (c *Client[TTx]) Driver() driver.Driver[TTx] { return c.driver }

// Owner returns the lease owner this client writes on the jobs it claims
// ("host:pid:id").
func (c *Client[TTx]) Owner() string { return c.core.owner }

// Stats returns the client's counters.
func (c *Client[TTx]) Stats() Stats { return c.core.stats.snapshot() }

// start is Client.Start.
func (c *clientCore) start(ctx context.Context) error {
	if len(c.workers) == 0 {
		return ErrNoWorkers
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrAlreadyStarted
	}
	if _, err := c.exec.Now(ctx); err != nil {
		return fmt.Errorf("leasehold: start: reach database: %w", err)
	}
	if err := c.checkSchema(ctx); err != nil {
		return err
	}
	if err := c.openReserved(ctx); err != nil {
		return err
	}
	c.started = true
	c.stopping.Store(false)
	c.handlerBase = context.WithValue(context.Background(), coreContextKey{}, c)
	c.interrupted.Store(false)

	serviceCtx, serviceCancel := context.WithCancel(context.Background())
	c.serviceCancel = serviceCancel
	hb := &heartbeater{exec: c.leaseExec, owner: c.owner, leases: c.leases, writeMu: c.completer.writeMu, logger: c.logger, stats: &c.stats, observe: c.middleware.observeHeartbeat}
	c.goService(serviceCtx, hb.run)
	c.goService(serviceCtx, c.completer.run)
	c.goService(serviceCtx, c.confirmer.run)
	c.startMaintenance(serviceCtx)

	claimCtx, claimCancel := context.WithCancel(context.Background())
	c.claimCancel = claimCancel
	if c.notifier != nil {
		ready := make(chan struct{})
		c.claimWG.Add(1)
		go func() {
			defer c.claimWG.Done()
			c.listen(claimCtx, ready)
		}()
		c.claimWG.Add(1)
		go func() {
			defer c.claimWG.Done()
			c.watchNotifications(claimCtx)
		}()
		select {
		case <-ready:
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			c.logger.Warn("leasehold: insert notifications not ready; polling meanwhile")
		}
	}
	for _, p := range c.producers {
		c.claimWG.Add(1)
		go func() {
			defer c.claimWG.Done()
			p.run(claimCtx, c)
		}()
	}
	return nil
}

// reserveTimeout bounds the opening of the reserved connections at Start.
const reserveTimeout = 10 * time.Second

// openReserved opens the lease machinery's reserved connections when the
// driver can reserve them, and points the machinery at them. Start fails
// when they cannot be opened rather than share the pool with the handlers
// unannounced: Config.ReservedConns < 0 chooses that explicitly.
func (c *clientCore) openReserved(ctx context.Context) error {
	if c.reserver == nil {
		return nil
	}
	// Pinning from a *sql.DB waits for free connections; a pool that has
	// none to spare must fail Start, not hang it.
	ctx, cancel := context.WithTimeout(ctx, reserveTimeout)
	defer cancel()
	r, err := c.reserver.OpenReserved(ctx, &driver.OpenReservedParams{Conns: c.cfg.ReservedConns})
	if err != nil {
		return fmt.Errorf("leasehold: start: reserve connections for the lease machinery (does the pool have them to spare? Config.ReservedConns < 0 shares the pool instead): %w", err)
	}
	c.reserved = r
	c.useLeaseExec(r)
	return nil
}

// closeReserved closes the reserved connections once the services using
// them have stopped, and points the machinery back at the driver's pool.
func (c *clientCore) closeReserved() {
	if c.reserved == nil {
		return
	}
	c.reserved.Close()
	c.reserved = nil
	c.useLeaseExec(c.exec)
}

// useLeaseExec points the lease machinery (claims, renewals, outcomes) at
// e, and sizes the outcome batches for it: where they carry claims
// (driver.FinishClaimer), outcomeBatch.
func (c *clientCore) useLeaseExec(e driver.Executor) {
	c.leaseExec = e
	c.completer.exec = e
	c.completer.maxBatch = c.cfg.CompleterMaxBatch
	if _, ok := e.(driver.FinishClaimer); ok {
		c.completer.maxBatch = outcomeBatch(c.cfg)
	}
}

func (c *clientCore) goService(ctx context.Context, run func(context.Context)) {
	c.serviceWG.Add(1)
	go func() {
		defer c.serviceWG.Done()
		run(ctx)
	}()
}

// stop is Client.Stop.
func (c *clientCore) stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.started {
		return ErrNotStarted
	}
	c.stopping.Store(true)
	c.claimCancel()
	c.claimWG.Wait()

	drained := make(chan struct{})
	go func() {
		c.leases.wg.Wait()
		close(drained)
	}()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = ctx.Err()
		c.interruptHandlers()
		<-drained
	}
	c.serviceCancel()
	c.serviceWG.Wait()
	c.closeReserved()
	// After the reserved connections went back to the pool, which may have
	// none to spare otherwise.
	c.deregister()
	c.started = false
	if err != nil {
		return fmt.Errorf("leasehold: stop: %w", err)
	}
	return nil
}

// outcomeBatch is the most outcomes the completer writes in one statement
// when outcome batches carry claims (driver.FinishClaimer):
// cfg.CompleterMaxBatch, but at most a completerFlushers-th of the
// client's workers (and no fewer than minOutcomeBatch). A drain's outcome
// batches then carry its claims, each sized to the workers its batch frees;
// were a batch as large as half the workers, only two would ever be in
// flight, each waiting for the other's jobs, and the database would idle
// between them. A quarter keeps completerFlushers of them in flight.
// Without claims along (SQLite's one writer) the producers claim on
// their own and larger batches cost fewer write transactions.
func outcomeBatch(cfg *Config) int {
	workers := 0
	for _, q := range cfg.Queues {
		workers += q.MaxWorkers
	}
	return min(cfg.CompleterMaxBatch, max(minOutcomeBatch, workers/completerFlushers))
}

// minOutcomeBatch is the least bound outcomeBatch sets.
const minOutcomeBatch = 100

// stopAndCancel is Client.StopAndCancel.
func (c *clientCore) stopAndCancel(ctx context.Context) error {
	c.mu.Lock()
	started := c.started
	if started {
		c.stopping.Store(true)
		c.interruptHandlers()
	}
	c.mu.Unlock()
	if !started {
		return ErrNotStarted
	}
	return c.stop(ctx)
}

// interruptHandlers cancels the context of every running handler with
// ErrClientStopping. A handler starting meanwhile sees interrupted set
// (runJob), so none is missed.
func (c *clientCore) interruptHandlers() {
	c.interrupted.Store(true)
	for _, l := range c.leases.snapshot(nil) {
		l.interrupt(ErrClientStopping)
	}
}

// coreContextKey holds the client running a handler.
type coreContextKey struct{}

// ClientFromContext returns the client running the handler whose context
// this is, for CompleteTx and inserts from inside a handler. It returns an
// error outside a handler or for the wrong transaction type.
func ClientFromContext[TTx any](ctx context.Context) (*Client[TTx], error) {
	core, _ := ctx.Value(coreContextKey{}).(*clientCore)
	if core == nil {
		return nil, errors.New("leasehold: no client in context (not inside a handler)")
	}
	c, ok := core.client.(*Client[TTx])
	if !ok {
		return nil, fmt.Errorf("leasehold: client in context has transaction type %T, not the one asked for", core.client)
	}
	return c, nil
}
