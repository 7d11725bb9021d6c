package payments

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leasetype"
)

// Kinds and queue of the payout jobs.
const (
	// PayoutKind is the kind of a merchant's payout job.
	PayoutKind = "payments.payout"
	// ReportKind is the kind of a payout batch's settlement report job.
	ReportKind = "payments.settlement_report"
	// PayoutQueue is the queue payout and report jobs run in.
	PayoutQueue = "payments.payout"
)

// PayoutArgs are the arguments of a merchant's payout in a batch.
type PayoutArgs struct {
	// BatchID is the payout batch.
	BatchID string `json:"batch_id"`
	// MerchantID is the merchant paid.
	MerchantID string `json:"merchant_id"`
}

// Kind implements leasehold.JobArgs.
func (PayoutArgs) Kind() string { return PayoutKind }

// InsertOpts puts payouts in their queue.
func (PayoutArgs) InsertOpts() leasehold.InsertOpts { return leasehold.InsertOpts{Queue: PayoutQueue} }

// ReportArgs are the arguments of a payout batch's settlement report.
type ReportArgs struct {
	// BatchID is the payout batch.
	BatchID string `json:"batch_id"`
}

// Kind implements leasehold.JobArgs.
func (ReportArgs) Kind() string { return ReportKind }

// InsertOpts puts reports in the payout queue.
func (ReportArgs) InsertOpts() leasehold.InsertOpts { return leasehold.InsertOpts{Queue: PayoutQueue} }

// PayoutBatch is an inserted payout graph.
type PayoutBatch struct {
	// BatchID is the batch.
	BatchID string
	// GraphID is the graph's ID (Client.Graph shows its progress).
	GraphID int64
	// PayoutJobs are the payout jobs by merchant.
	PayoutJobs map[string]int64
	// ReportJob is the settlement report job, which runs after every payout.
	ReportJob int64
}

// InsertPayoutBatch inserts a payout batch as one graph, in one
// transaction: a payout job per merchant (fan-out) and a settlement report
// job that waits for all of them (fan-in). A payout that is discarded or
// cancelled cancels the report (the default dependency policy): a report
// of a partial batch would not balance.
func InsertPayoutBatch[TTx any](ctx context.Context, client *leasehold.Client[TTx], batchID string, merchants []string) (*PayoutBatch, error) {
	if batchID == "" || len(merchants) == 0 {
		return nil, fmt.Errorf("payments: payout batch %q: a batch ID and at least one merchant are required", batchID)
	}
	g := leasehold.NewGraph()
	steps := make([]leasehold.GraphStep, 0, len(merchants))
	for _, m := range merchants {
		steps = append(steps, g.Add("payout:"+m, PayoutArgs{BatchID: batchID, MerchantID: m}, nil))
	}
	g.Add("report", ReportArgs{BatchID: batchID}, nil, steps...)
	res, err := client.InsertGraph(ctx, g)
	if err != nil {
		return nil, fmt.Errorf("payments: insert payout batch %s: %w", batchID, err)
	}
	b := &PayoutBatch{BatchID: batchID, GraphID: res.GraphID, PayoutJobs: make(map[string]int64, len(merchants)), ReportJob: res.IDs["report"]}
	for _, m := range merchants {
		b.PayoutJobs[m] = res.IDs["payout:"+m]
	}
	return b, nil
}

// PayoutWorker works payout and settlement report jobs: each writes its row
// and completes its job in one transaction fenced by the lease token, so a
// batch pays each merchant once and reports once.
type PayoutWorker[TTx any] struct {
	// Store is the payments database.
	Store *Store[TTx]

	payouts, reports, fenced atomic.Int64
}

// PayoutStats are a PayoutWorker's counters.
type PayoutStats struct {
	// Payouts and Reports count the rows the worker wrote.
	Payouts, Reports int64
	// Fenced counts recordings rolled back because the lease was lost.
	Fenced int64
}

// Stats returns the worker's counters.
func (w *PayoutWorker[TTx]) Stats() PayoutStats {
	return PayoutStats{Payouts: w.payouts.Load(), Reports: w.reports.Load(), Fenced: w.fenced.Load()}
}

// inTx runs fn in a store transaction and completes job in it, fenced by
// the lease token: a worker that lost its lease writes nothing.
func (w *PayoutWorker[TTx]) inTx(ctx context.Context, job *leasetype.JobRow, fn func(tx TTx) error) error {
	client, err := leasehold.ClientFromContext[TTx](ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := w.Store.Begin(ctx)
	if err != nil {
		return err
	}
	defer w.Store.Rollback(ctx, tx) //nolint:errcheck // no-op after commit
	if err := fn(tx); err != nil {
		return err
	}
	if err := client.CompleteTx(ctx, tx, job); err != nil {
		if leasehold.IsLeaseLost(err) {
			w.fenced.Add(1)
		}
		return err
	}
	return w.Store.Commit(ctx, tx)
}

// payoutWork pays out one merchant.
func (w *PayoutWorker[TTx]) payoutWork(ctx context.Context, job *leasehold.Job[PayoutArgs]) error {
	var created bool
	err := w.inTx(ctx, job.JobRow, func(tx TTx) error {
		var err error
		_, created, err = w.Store.PayoutTx(ctx, tx, job.Args.BatchID, job.Args.MerchantID, job.Token())
		return err
	})
	if err == nil && created {
		w.payouts.Add(1)
	}
	return err
}

// reportWork writes the batch's settlement report.
func (w *PayoutWorker[TTx]) reportWork(ctx context.Context, job *leasehold.Job[ReportArgs]) error {
	err := w.inTx(ctx, job.JobRow, func(tx TTx) error {
		_, err := w.Store.ReportTx(ctx, tx, job.Args.BatchID)
		return err
	})
	if err == nil {
		w.reports.Add(1)
	}
	return err
}

// AddPayoutWorkers registers the payout and report workers of w on ws.
func AddPayoutWorkers[TTx any](ws *leasehold.Workers, w *PayoutWorker[TTx]) error {
	if w == nil || w.Store == nil {
		return errors.New("payments: payout worker without a store")
	}
	if err := leasehold.AddWorkerSafely[PayoutArgs](ws, leasehold.WorkFunc[PayoutArgs](w.payoutWork), nil); err != nil {
		return err
	}
	return leasehold.AddWorkerSafely[ReportArgs](ws, leasehold.WorkFunc[ReportArgs](w.reportWork), nil)
}
