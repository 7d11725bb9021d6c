package leasehold

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// insertJobs inserts ps on exec. When the insert is the client's own (wake)
// and the client may start its jobs itself (leasesOnInsert), the jobs go in
// leased to this client (driver.LeasedInserter) and start here, once the
// insert has committed. It returns the insert's results and the positions,
// per queue, of the first available job it inserted: those the producers
// are to be woken for.
func (c *clientCore) insertJobs(ctx context.Context, exec driver.Executor, ps []*driver.JobInsertParams, wake bool) ([]*driver.JobInsertResult, map[string]driver.ClaimPosition, error) {
	params := &driver.JobInsertManyParams{Jobs: ps, SenderTracker: c.tracking(wake)}
	li, p, n := c.leasesOnInsert(exec, ps, wake)
	if n == 0 {
		rows, err := exec.JobInsertMany(ctx, params)
		if err != nil {
			return nil, nil, err
		}
		return rows, availableFirst(rows), nil
	}
	defer p.alongDone(n)
	sentAt := time.Now()
	// Kinds with the stuck expiry policy are not leased on insert: an
	// insert whose result is lost as it commits (its context cancelled,
	// its connection gone) leaves its jobs leased to no one known until
	// the leases expire, and such a job would then wait in stuck for an
	// operator without having run. The claim loop claims them.
	lease := c.claimParams(p.queue, n)
	lease.ExcludeKinds = c.stuckKinds
	rows, err := li.JobInsertLeased(ctx, params, lease)
	if err != nil {
		return nil, nil, err
	}
	var leased []*leasetype.JobRow
	for _, r := range rows {
		if !r.UniqueSkipped && r.Job.State == leasetype.JobStateRunning && r.Job.LeaseOwner == c.owner {
			// The lease gets a row of its own: the result is the caller's.
			row := *r.Job
			leased = append(leased, &row)
		}
	}
	c.startJobs(p, leased, sentAt)
	return rows, availableFirst(rows), nil
}

// leasesOnInsert returns the executor's LeasedInserter, the producer of the
// jobs' queue and how many of its workers it reserved for jobs the insert
// of ps leases to this client; 0 workers when the insert leases none. The
// client leases the jobs of an insert of its own (wake) that all go to one
// queue it works, without a schedule or dependencies, and not of a kind
// with the stuck expiry policy (insertJobs), when the producer
// would start them at once: its loop runs, the queue has no fleet-wide
// limits, no backlog is waiting and workers are free. It reserves at most
// one worker per job. A reservation ends with the producer's alongDone.
func (c *clientCore) leasesOnInsert(exec driver.Executor, ps []*driver.JobInsertParams, wake bool) (driver.LeasedInserter, *producer, int) {
	if !wake || len(ps) == 0 {
		return nil, nil, 0
	}
	li, ok := exec.(driver.LeasedInserter)
	if !ok {
		return nil, nil, 0
	}
	queue := ps[0].Queue
	for _, p := range ps {
		if p.Queue != queue || p.ScheduledAt != nil || len(p.DependsOn) > 0 || len(p.DependsOnIndex) > 0 {
			return nil, nil, 0
		}
	}
	p := c.producers[queue]
	if p == nil {
		return nil, nil, 0
	}
	n := p.reserveWithInsert(len(ps))
	if n == 0 {
		return nil, nil, 0
	}
	return li, p, n
}

// availableFirst returns, per queue, the claim position of the first of
// the available jobs rows inserted.
func availableFirst(rows []*driver.JobInsertResult) map[string]driver.ClaimPosition {
	first := map[string]driver.ClaimPosition{}
	for _, r := range rows {
		if !r.UniqueSkipped && r.Job.State == leasetype.JobStateAvailable {
			keepFirst(first, r.Job.Queue, driver.PositionOf(r.Job))
		}
	}
	return first
}
