package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

func (e *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	if params.Max < 1 {
		return nil, nil
	}
	kinds := make([]string, 0, len(params.KindLeaseTTL))
	ttls := make([]int64, 0, len(params.KindLeaseTTL))
	for kind, ttl := range params.KindLeaseTTL {
		kinds = append(kinds, kind)
		ttls = append(ttls, ttl.Milliseconds())
	}
	// The head of the claim order: before every priority, time and ID.
	afterPriority, afterTime, afterID := int16(0), pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}, int64(0)
	if a := params.After; a != nil {
		afterPriority, afterTime, afterID = int16(a.Priority), pgtype.Timestamptz{Time: a.ScheduledAt, Valid: true}, a.ID
	}
	// pgx sends a nil slice as NULL, and the claim's filters are written
	// for arrays: NULL would match nothing.
	rows, err := e.db.Query(ctx, sqlJobClaim, params.Queue, params.Max, params.Owner,
		kinds, ttls, params.DefaultLeaseTTL.Milliseconds(), nonNil(params.StuckKinds),
		nonNil(params.Kinds), nonNil(params.ExcludeKinds), afterPriority, afterTime, afterID)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", translate(err))
	}
	jobs, err := scanJobs(rows, params.Max)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", translate(err))
	}
	// UPDATE ... RETURNING has no order of its own.
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return driver.PositionOf(a).Compare(driver.PositionOf(b))
	})
	return jobs, nil
}

func (e *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error) {
	if len(params.Leases) == 0 {
		return []int64{}, nil
	}
	ids := make([]int64, len(params.Leases))
	tokens := make([]int64, len(params.Leases))
	ttls := make([]int64, len(params.Leases))
	for i, l := range params.Leases {
		ids[i], tokens[i], ttls[i] = l.ID, l.Token, l.TTL.Milliseconds()
	}
	return e.queryIDs(ctx, "renew leases", sqlJobHeartbeat, ids, tokens, ttls)
}

// finishStates are the states a lease may end in.
var finishStates = []leasetype.JobState{
	leasetype.JobStateCompleted, leasetype.JobStateRetryable, leasetype.JobStateDiscarded,
	leasetype.JobStateCancelled, leasetype.JobStateAvailable, leasetype.JobStateScheduled,
}

func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	n := len(params.Items)
	if n == 0 {
		return []int64{}, nil
	}
	if allCompletions(params.Items) {
		ids, tokens := make([]int64, n), make([]int64, n)
		for i, it := range params.Items {
			ids[i], tokens[i] = it.ID, it.Token
		}
		return e.queryIDs(ctx, "finish leases", sqlJobComplete, ids, tokens)
	}
	var (
		ids        = make([]int64, n)
		tokens     = make([]int64, n)
		states     = make([]string, n)
		outcomes   = make([]string, n)
		scheduled  = make([]pgtype.Timestamptz, n)
		errs       = make([]string, n)
		countError = make([]bool, n)
	)
	for i, it := range params.Items {
		if !slices.Contains(finishStates, it.State) {
			return nil, fmt.Errorf("finish leases: job %d: cannot end a lease in state %q", it.ID, it.State)
		}
		ids[i], tokens[i] = it.ID, it.Token
		states[i], outcomes[i] = string(it.State), string(it.Outcome)
		if it.ScheduledAt != nil {
			scheduled[i] = pgtype.Timestamptz{Time: *it.ScheduledAt, Valid: true}
		}
		errs[i], countError[i] = it.Error, it.CountError
	}
	return e.queryIDs(ctx, "finish leases", sqlJobFinish, ids, tokens, states, outcomes, scheduled, errs, countError)
}

func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	if params.Limit < 1 {
		return nil, nil
	}
	rows, err := e.db.Query(ctx, sqlJobExpire, params.Limit, params.MaxExpiries)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", translate(err))
	}
	jobs, err := scanJobs(rows, params.Limit)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", translate(err))
	}
	return jobs, nil
}

// allCompletions reports whether every item is a plain completion, which
// sqlJobComplete writes.
func allCompletions(items []*driver.JobFinish) bool {
	for _, it := range items {
		if it.State != leasetype.JobStateCompleted || it.Outcome != leasetype.OutcomeCompleted ||
			it.Error != "" || it.CountError || it.ScheduledAt != nil {
			return false
		}
	}
	return true
}

// nonNil returns s, or an empty slice for nil: pgx encodes a nil slice as
// NULL, an empty one as an empty array.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
