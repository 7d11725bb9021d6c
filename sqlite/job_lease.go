package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/leasetype"
)

// JobClaim leases up to params.Max jobs of params.Queue in one UPDATE ...
// RETURNING, in its own immediate transaction on the pool.
func (e *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	kindTTL := make(map[string]int64, len(params.KindLeaseTTL))
	for kind, ttl := range params.KindLeaseTTL {
		if ms, ok := millis(ttl).(int64); ok {
			kindTTL[kind] = ms
		}
	}
	kindTTLJSON, err := json.Marshal(kindTTL)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: encode lease TTLs: %w", err)
	}
	stuck := params.StuckKinds
	if stuck == nil {
		stuck = []string{}
	}
	stuckJSON, err := json.Marshal(stuck)
	if err != nil {
		return nil, fmt.Errorf("claim jobs: encode stuck kinds: %w", err)
	}
	defaultTTL, _ := millis(params.DefaultLeaseTTL).(int64)

	var jobs []*leasetype.JobRow
	err = e.write(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, queryJobClaim, params.Owner, string(kindTTLJSON),
			defaultTTL, string(stuckJSON), params.Queue, max(params.Max, 1))
		if err != nil {
			return err
		}
		jobs, err = scanJobs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim jobs: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority),
			a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// leaseRenewal is the JSON form of a driver.LeaseRenewal for queryJobHeartbeat.
type leaseRenewal struct {
	ID    int64 `json:"id"`
	Token int64 `json:"token"`
	TTLMS int64 `json:"ttl_ms"`
}

// JobHeartbeat renews leases in one UPDATE ... FROM json_each.
func (e *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error) {
	if len(params.Leases) == 0 {
		return []int64{}, nil
	}
	leases := make([]leaseRenewal, len(params.Leases))
	for i, l := range params.Leases {
		ms, _ := millis(l.TTL).(int64)
		leases[i] = leaseRenewal{ID: l.ID, Token: l.Token, TTLMS: ms}
	}
	leasesJSON, err := json.Marshal(leases)
	if err != nil {
		return nil, fmt.Errorf("renew leases: encode: %w", err)
	}
	ids := []int64{}
	err = e.write(ctx, func(q querier) error {
		ids = ids[:0]
		rows, err := q.QueryContext(ctx, queryJobHeartbeat, string(leasesJSON))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// JobFinish ends the leases of params.Items in one transaction: for each, a
// conditional UPDATE, then its attempt row when the lease was still held.
func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	if len(params.Items) == 0 {
		return []int64{}, nil
	}
	written := []int64{}
	err := e.write(ctx, func(q querier) error {
		written = written[:0]
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		for _, it := range params.Items {
			countError := 0
			if it.CountError {
				countError = 1
			}
			var (
				attempt, heartbeats  int
				owner                string
				leasedAt, leaseUntil int64
				heartbeatAt          sql.NullInt64
			)
			err := q.QueryRowContext(ctx, queryJobFinish, it.ID, it.Token, string(it.State),
				countError, nullString(it.Error), micros(it.ScheduledAt), now,
			).Scan(&attempt, &owner, &leasedAt, &leaseUntil, &heartbeatAt, &heartbeats)
			if isNoRows(err) {
				continue // the lease was lost
			}
			if err != nil {
				return fmt.Errorf("job %d: %w", it.ID, err)
			}
			_, err = q.ExecContext(ctx, queryAttemptInsert, it.ID, attempt, it.Token, owner,
				leasedAt, leaseUntil, heartbeatAt, heartbeats, now, string(it.Outcome), nullString(it.Error))
			if err != nil {
				return fmt.Errorf("record attempt of job %d: %w", it.ID, err)
			}
			written = append(written, it.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	return written, nil
}

// JobExpire reclaims expired leases in one transaction: an UPDATE ...
// RETURNING of the jobs, then one INSERT ... SELECT of their attempt rows.
func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = 1000
	}
	var jobs []*leasetype.JobRow
	err := e.write(ctx, func(q querier) error {
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		rows, err := q.QueryContext(ctx, queryJobExpire, limit, params.MaxExpiries, now)
		if err != nil {
			return err
		}
		if jobs, err = scanJobs(rows); err != nil || len(jobs) == 0 {
			return err
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, queryAttemptInsertExpired, string(idsJSON), now); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}
