package drivertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// errInjected is returned by a faultDriver's executor while partitioned.
var errInjected = errors.New("drivertest: injected fault: database unreachable")

// errLostReply is returned by a JobFinish whose write committed, in place
// of its result (faultDriver.lostReplies).
var errLostReply = errors.New("drivertest: injected fault: connection lost during COMMIT")

// faultMode is the fault a faultDriver injects.
type faultMode int32

const (
	faultNone faultMode = iota
	// faultPartition fails every call at once, like a refused connection.
	faultPartition
	// faultBlackhole blocks every call until its context ends, like packets
	// that are dropped: the caller only learns from its own timeouts.
	faultBlackhole
	// faultPauseLeases blackholes only lease renewals and outcomes, like a
	// process paused between the calls it makes.
	faultPauseLeases
	// faultTxOnly fails only transactions the client begins: a client
	// that can renew its leases but not get its writes through.
	faultTxOnly
)

// faultDriver wraps a driver with a switch that cuts it off from the
// database, the fault seam of the client-level suite.
type faultDriver[TTx any] struct {
	driver.Driver[TTx]
	mode       atomic.Int32
	heartbeats atomic.Int64 // JobHeartbeat calls
	renewals   atomic.Int64 // leases carried by those calls
	// finishItems counts the outcomes the client itself writes (JobFinish
	// items on the pool's executors, not in a caller's transaction), and
	// leaseReads the JobAttempts calls that name leases.
	finishItems atomic.Int64
	leaseReads  atomic.Int64
	// begins counts the transactions begun on the driver's executors (a
	// limited claim begins one each).
	begins atomic.Int64
	// lostReplies is how many JobFinish calls still to come lose their
	// reply: the write commits, and the caller gets errLostReply, as when
	// the connection drops during COMMIT.
	lostReplies atomic.Int32
	healed      chan struct{}
	mu          sync.Mutex
}

func newFaultDriver[TTx any](d driver.Driver[TTx]) *faultDriver[TTx] {
	return &faultDriver[TTx]{Driver: d, healed: make(chan struct{})}
}

func (d *faultDriver[TTx]) set(m faultMode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mode.Store(int32(m))
	if m == faultNone {
		close(d.healed)
		d.healed = make(chan struct{})
	}
}

func (d *faultDriver[TTx]) GetExecutor() driver.Executor {
	return &faultExecutor[TTx]{Executor: d.Driver.GetExecutor(), d: d}
}

func (d *faultDriver[TTx]) UnwrapExecutor(tx TTx) driver.Executor {
	return &faultExecutor[TTx]{Executor: d.Driver.UnwrapExecutor(tx), d: d, inTx: true}
}

// fault applies the current fault to one call; lease reports whether the
// call is a lease renewal or outcome.
func (d *faultDriver[TTx]) fault(ctx context.Context, lease bool) error {
	d.mu.Lock()
	mode, healed := faultMode(d.mode.Load()), d.healed
	d.mu.Unlock()
	switch {
	case mode == faultPartition:
		return errInjected
	case mode == faultBlackhole, mode == faultPauseLeases && lease:
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-healed:
			return nil
		}
	}
	return nil
}

type faultExecutor[TTx any] struct {
	driver.Executor
	d    *faultDriver[TTx]
	inTx bool // runs in a caller's transaction (UnwrapExecutor)
}

func (e *faultExecutor[TTx]) JobAttempts(ctx context.Context, p *driver.JobAttemptsParams) ([]*leasetype.AttemptRow, error) {
	if len(p.Leases) > 0 {
		e.d.leaseReads.Add(1)
	}
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.JobAttempts(ctx, p)
}

func (e *faultExecutor[TTx]) Now(ctx context.Context) (time.Time, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return time.Time{}, err
	}
	return e.Executor.Now(ctx)
}

func (e *faultExecutor[TTx]) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.JobClaim(ctx, p)
}

func (e *faultExecutor[TTx]) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	e.d.heartbeats.Add(1)
	e.d.renewals.Add(int64(len(p.Leases)))
	if err := e.d.fault(ctx, true); err != nil {
		return nil, err
	}
	return e.Executor.JobHeartbeat(ctx, p)
}

func (e *faultExecutor[TTx]) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	if !e.inTx {
		e.d.finishItems.Add(int64(len(p.Items)))
	}
	if err := e.d.fault(ctx, true); err != nil {
		return nil, err
	}
	ids, err := e.Executor.JobFinish(ctx, p)
	if err == nil && e.d.takeLostReply() {
		return nil, errLostReply
	}
	return ids, err
}

// takeLostReply reports whether the call that asks loses its reply.
func (d *faultDriver[TTx]) takeLostReply() bool {
	for {
		n := d.lostReplies.Load()
		if n <= 0 {
			return false
		}
		if d.lostReplies.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (e *faultExecutor[TTx]) JobExpire(ctx context.Context, p *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.JobExpire(ctx, p)
}

func (e *faultExecutor[TTx]) JobGet(ctx context.Context, p *driver.JobGetParams) (*leasetype.JobRow, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.JobGet(ctx, p)
}

func (e *faultExecutor[TTx]) JobInsertMany(ctx context.Context, p *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	if err := e.d.fault(ctx, false); err != nil {
		return nil, err
	}
	return e.Executor.JobInsertMany(ctx, p)
}
