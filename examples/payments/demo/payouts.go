package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples/payments"
	"github.com/leasehold/leasehold/leasetype"
)

// merchant returns the ID of the run's merchant i.
func (r *run[TTx]) merchant(i int) string {
	return fmt.Sprintf("m_%s_%03d", r.cfg.RunID, i)
}

// batchID is the run's payout batch.
func (r *run[TTx]) batchID() string { return "payout_" + r.cfg.RunID }

// payOut inserts the run's payout batch, one graph of a payout job per
// merchant and the settlement report after all of them, and waits until
// the report job completed.
func (r *run[TTx]) payOut(ctx context.Context, c *leasehold.Client[TTx]) (*payments.PayoutBatch, error) {
	merchants := make([]string, r.cfg.Merchants)
	for i := range merchants {
		merchants[i] = r.merchant(i)
	}
	batch, err := payments.InsertPayoutBatch(ctx, c, r.batchID(), merchants)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		job, err := c.JobGet(ctx, batch.ReportJob)
		if err == nil {
			switch {
			case job.State == leasetype.JobStateCompleted:
				return batch, nil
			case job.State.Finalized():
				return batch, fmt.Errorf("settlement report job %d ended %s: %s", job.ID, job.State, job.LastError)
			}
		}
		select {
		case <-ctx.Done():
			return batch, fmt.Errorf("payout batch %s not reported within %s", batch.BatchID, r.cfg.Timeout)
		case <-tick.C:
		}
	}
}
