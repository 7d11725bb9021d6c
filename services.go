package leasehold

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/maintenance"
	"github.com/leasehold/leasehold/leasetype"
)

// startMaintenance starts the background services of package maintenance,
// wired to this client: the expirer, the cancel poller and, for the roles
// this client's config gives it, the pruner and the periodic enqueuer,
// each with its own leader elector.
func (c *clientCore) startMaintenance(ctx context.Context) {
	expirer := &maintenance.Expirer{
		Exec: c.leaseExec, Interval: c.cfg.WatcherInterval, Limit: 1000, MaxExpiries: c.cfg.MaxExpiries, Logger: c.logger,
		OnExpired: c.onExpired,
	}
	c.goService(ctx, expirer.Run)
	poller := &maintenance.CancelPoller{
		Exec: c.leaseExec, Owner: c.owner, Interval: c.cfg.CancelCheckInterval, Logger: c.logger,
		HoldsLeases: c.leases.any,
		OnCancelRequested: func(ref driver.LeaseRef) {
			if l := c.leases.get(ref.ID, ref.Token); l != nil && l.requestCancel() {
				c.stats.cancelRequests.Add(1)
			}
		},
	}
	c.goService(ctx, poller.Run)
	if c.registrar = c.newRegistrar(); c.registrar != nil {
		c.goService(ctx, c.registrar.Run)
	}
	if len(c.cfg.PeriodicJobs) > 0 {
		e := &maintenance.PeriodicEnqueuer{
			Exec: c.exec, Elector: c.newElector(maintenance.LeaderPeriodic), Logger: c.logger,
			OnEnqueued: func(queue string) {
				c.stats.periodicEnqueued.Add(1)
				c.wakeQueue(queue)
			},
		}
		for _, j := range c.cfg.PeriodicJobs {
			e.Jobs = append(e.Jobs, c.periodicJob(j))
		}
		c.goService(ctx, e.Run)
	}
	if r := c.cfg.Retention; r.enabled() {
		p := &maintenance.Pruner{
			Exec: c.exec, Elector: c.newElector(maintenance.LeaderMaintenance), Logger: c.logger,
			Completed: r.Completed, Cancelled: r.Cancelled, Discarded: r.Discarded, Attempts: r.Attempts, Interval: r.Interval,
			OnPruned: func(n int64) { c.stats.pruned.Add(n) },
		}
		c.goService(ctx, p.Run)
	}
}

// onExpired reports leases reclaimed by the expirer or by a limited claim
// (countHeld), with the rows after the change: statistics, events, and a
// wake-up of the queues they are available in again.
func (c *clientCore) onExpired(rows []*leasetype.JobRow) {
	c.stats.expired.Add(int64(len(rows)))
	c.events.expired(rows)
	for _, r := range rows {
		if r.State == leasetype.JobStateAvailable {
			c.wakeQueue(r.Queue)
		}
	}
}

func (c *clientCore) newElector(role string) *maintenance.Elector {
	return &maintenance.Elector{Exec: c.exec, Name: role, Owner: c.owner, TTL: c.cfg.LeaderTTL, Logger: c.logger}
}

// periodicJob turns j into the periodic enqueuer's schedule: its Insert
// inserts the slot's job through the insert middleware, with the slot's
// unique key and metadata.
func (c *clientCore) periodicJob(j *PeriodicJob) maintenance.PeriodicJob {
	return maintenance.PeriodicJob{
		Name:       j.Name,
		Schedule:   j.Schedule,
		SkipMissed: j.MissedRuns == SkipMissed,
		Insert: func(ctx context.Context, exec driver.Executor, slot time.Time, missed int) (jobID int64, queue string, err error) {
			args, opts := j.Job(slot)
			o := InsertOpts{}
			if opts != nil {
				o = *opts
			}
			o.UniqueKey = "periodic:" + j.Name + ":" + slot.UTC().Format(time.RFC3339Nano)
			meta := map[string]any{}
			for k, v := range o.Metadata {
				meta[k] = v
			}
			meta["periodic"], meta["periodic_slot"] = j.Name, slot.UTC().Format(time.RFC3339Nano)
			if missed > 0 {
				meta["periodic_missed"] = missed
			}
			o.Metadata = meta
			err = c.withInsertMiddleware(ctx, []InsertManyParams{{Args: args, InsertOpts: &o}}, func(ctx context.Context, ps []*driver.JobInsertParams) error {
				res, err := exec.JobInsertMany(ctx, &driver.JobInsertManyParams{Jobs: ps})
				if err != nil {
					return fmt.Errorf("insert slot %s: %w", slot.Format(time.RFC3339), err)
				}
				jobID, queue = res[0].Job.ID, res[0].Job.Queue
				return nil
			})
			return jobID, queue, err
		},
	}
}

// newRegistrar returns the service that keeps this client's row in the
// client registry, nil when Config.RegistryInterval disables it.
func (c *clientCore) newRegistrar() *maintenance.ClientRegistrar {
	if c.cfg.RegistryInterval < 0 {
		return nil
	}
	queues := make([]string, 0, len(c.producers))
	for name := range c.producers {
		queues = append(queues, name)
	}
	sort.Strings(queues)
	return &maintenance.ClientRegistrar{
		Exec: c.exec,
		Row: driver.ClientRegisterParams{
			Owner: c.owner, Host: ownerHost(), PID: int64(os.Getpid()), ID: c.cfg.ID, Version: moduleVersion(), Queues: queues,
		},
		Running:    func() int64 { return int64(c.leases.count()) },
		Interval:   c.cfg.RegistryInterval,
		PruneAfter: c.cfg.LeaseTTL,
		Logger:     c.logger,
	}
}

// deregisterTimeout bounds the deletion of the registry row at Stop.
const deregisterTimeout = 5 * time.Second

// deregister deletes this client's registry row once its services have
// stopped, so that the fleet view drops it at once; a failure only leaves
// the row to expire.
func (c *clientCore) deregister() {
	if c.registrar == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deregisterTimeout)
	defer cancel()
	c.registrar.Remove(ctx)
	c.registrar = nil
}

// modulePath is this module's path, as build information names it.
const modulePath = "github.com/leasehold/leasehold"

// moduleVersion returns the version of this module the binary was built
// with: the main module's version when the binary is built from this
// module (cmd/leasehold), else the dependency's (a replaced dependency's
// replacement version); "(devel)" when unknown.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path != modulePath {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			return m.Replace.Version
		}
		if m.Version != "" {
			return m.Version
		}
	}
	return "(devel)"
}
