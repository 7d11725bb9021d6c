package demo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// errCrashed is what a crashed worker's database calls fail with.
var errCrashed = errors.New("demo: worker crashed (its database calls go nowhere)")

// faultDriver wraps a worker client's driver with two switches: a crash,
// after which every call fails (the process is gone and never talks to the
// database again), and a per-job freeze of lease renewals, which simulates a
// process paused past its lease: the database sees no renewals while the
// paused client believes they succeeded, as it would not run to notice.
type faultDriver[TTx any] struct {
	driver.Driver[TTx]
	dead   atomic.Bool
	mu     sync.Mutex
	frozen map[int64]bool
}

// notifyingFaultDriver is a faultDriver on a driver that can push insert
// notifications; it keeps that capability.
type notifyingFaultDriver[TTx any] struct {
	*faultDriver[TTx]
	n driver.Notifier
}

// ListenInserts implements driver.Notifier while the worker is alive.
func (d *notifyingFaultDriver[TTx]) ListenInserts(ctx context.Context, ready func(), fn func(driver.InsertNotice)) error {
	if d.dead.Load() {
		return errCrashed
	}
	return d.n.ListenInserts(ctx, ready, fn)
}

// wrap returns the fault driver and the driver a client should use.
func wrap[TTx any](d driver.Driver[TTx]) (*faultDriver[TTx], driver.Driver[TTx]) {
	fd := &faultDriver[TTx]{Driver: d, frozen: map[int64]bool{}}
	if n, ok := driver.NotifierOf(d); ok {
		return fd, &notifyingFaultDriver[TTx]{faultDriver: fd, n: n}
	}
	return fd, fd
}

func (d *faultDriver[TTx]) crash() { d.dead.Store(true) }

func (d *faultDriver[TTx]) freeze(jobID int64, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if on {
		d.frozen[jobID] = true
	} else {
		delete(d.frozen, jobID)
	}
}

func (d *faultDriver[TTx]) isFrozen(jobID int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.frozen[jobID]
}

// GetExecutor implements driver.Driver.
func (d *faultDriver[TTx]) GetExecutor() driver.Executor {
	return &faultExecutor[TTx]{Executor: d.Driver.GetExecutor(), d: d}
}

// UnwrapExecutor implements driver.Driver.
func (d *faultDriver[TTx]) UnwrapExecutor(tx TTx) driver.Executor {
	return &faultExecutor[TTx]{Executor: d.Driver.UnwrapExecutor(tx), d: d}
}

type faultExecutor[TTx any] struct {
	driver.Executor
	d *faultDriver[TTx]
}

func (e *faultExecutor[TTx]) check() error {
	if e.d.dead.Load() {
		return errCrashed
	}
	return nil
}

func (e *faultExecutor[TTx]) Begin(ctx context.Context) (driver.ExecutorTx, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.Begin(ctx)
}

func (e *faultExecutor[TTx]) Exec(ctx context.Context, sql string) error {
	if err := e.check(); err != nil {
		return err
	}
	return e.Executor.Exec(ctx, sql)
}

func (e *faultExecutor[TTx]) Now(ctx context.Context) (time.Time, error) {
	if err := e.check(); err != nil {
		return time.Time{}, err
	}
	return e.Executor.Now(ctx)
}

func (e *faultExecutor[TTx]) JobInsertMany(ctx context.Context, p *driver.JobInsertManyParams) ([]*driver.JobInsertResult, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobInsertMany(ctx, p)
}

func (e *faultExecutor[TTx]) JobInsertFast(ctx context.Context, p *driver.JobInsertFastParams) (int, error) {
	if err := e.check(); err != nil {
		return 0, err
	}
	return e.Executor.JobInsertFast(ctx, p)
}

func (e *faultExecutor[TTx]) JobClaim(ctx context.Context, p *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobClaim(ctx, p)
}

// JobHeartbeat drops the renewals of frozen jobs but reports them renewed.
func (e *faultExecutor[TTx]) JobHeartbeat(ctx context.Context, p *driver.JobHeartbeatParams) ([]int64, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	var frozen []int64
	pass := &driver.JobHeartbeatParams{Owner: p.Owner, Leases: make([]driver.LeaseRenewal, 0, len(p.Leases))}
	for _, l := range p.Leases {
		if e.d.isFrozen(l.ID) {
			frozen = append(frozen, l.ID)
			continue
		}
		pass.Leases = append(pass.Leases, l)
	}
	if len(pass.Leases) == 0 {
		return frozen, nil
	}
	ids, err := e.Executor.JobHeartbeat(ctx, pass)
	if err != nil {
		return nil, err
	}
	return append(ids, frozen...), nil
}

func (e *faultExecutor[TTx]) JobFinish(ctx context.Context, p *driver.JobFinishParams) ([]int64, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobFinish(ctx, p)
}

func (e *faultExecutor[TTx]) JobExpire(ctx context.Context, p *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobExpire(ctx, p)
}

func (e *faultExecutor[TTx]) JobGet(ctx context.Context, p *driver.JobGetParams) (*leasetype.JobRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobGet(ctx, p)
}

func (e *faultExecutor[TTx]) JobList(ctx context.Context, p *driver.JobListParams) ([]*leasetype.JobRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.JobList(ctx, p)
}

func (e *faultExecutor[TTx]) JobSetState(ctx context.Context, p *driver.JobSetStateParams) (*leasetype.JobRow, bool, error) {
	if err := e.check(); err != nil {
		return nil, false, err
	}
	return e.Executor.JobSetState(ctx, p)
}

// JobCheckpoint keeps the wrapped executor's stage checkpoints
// (driver.StageExecutor) while the worker is alive.
func (e *faultExecutor[TTx]) JobCheckpoint(ctx context.Context, p *driver.JobCheckpointParams) (bool, error) {
	if err := e.check(); err != nil {
		return false, err
	}
	return e.Executor.(driver.StageExecutor).JobCheckpoint(ctx, p)
}

// JobStages implements driver.StageExecutor.
func (e *faultExecutor[TTx]) JobStages(ctx context.Context, p *driver.JobStagesParams) ([]*leasetype.StageRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.(driver.StageExecutor).JobStages(ctx, p)
}

// JobDependencies implements driver.StageExecutor.
func (e *faultExecutor[TTx]) JobDependencies(ctx context.Context, p *driver.JobDependenciesParams) ([]*leasetype.DependencyRow, error) {
	if err := e.check(); err != nil {
		return nil, err
	}
	return e.Executor.(driver.StageExecutor).JobDependencies(ctx, p)
}
