package sqlite

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// JobClaim leases up to params.Max jobs of params.Queue in one UPDATE ...
// RETURNING, in its own immediate transaction on the pool. On the pool an
// empty queue is seen by a read first, without waiting for the write lock.
// A claim with Kinds or ExcludeKinds runs a statement of its own, so the
// plain claim keeps its shape.
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

	claim, exists := queryJobClaim, queryJobClaimableExists
	args := []any{params.Owner, string(kindTTLJSON), defaultTTL, string(stuckJSON), params.Queue, max(params.Max, 1)}
	existsArgs := []any{params.Queue}
	if len(params.Kinds) > 0 || len(params.ExcludeKinds) > 0 {
		kinds, err := jsonStrings(params.Kinds)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: encode kinds: %w", err)
		}
		exclude, err := jsonStrings(params.ExcludeKinds)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: encode excluded kinds: %w", err)
		}
		claim, exists = queryJobClaimKinds, queryJobClaimableKindsExists
		args = append(args, kinds, exclude)
		existsArgs = append(existsArgs, kinds, exclude)
	}

	if e.onPool {
		if found, err := e.exists(ctx, exists, existsArgs...); err != nil || !found {
			if err != nil {
				return nil, fmt.Errorf("claim jobs: %w", err)
			}
			return []*leasetype.JobRow{}, nil
		}
	}
	var jobs []*leasetype.JobRow
	err = e.write(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, claim, args...)
		if err != nil {
			return err
		}
		jobs, err = sqlbackend.ScanAll(rows, scanJob)
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

// jsonStrings encodes a list of strings as a JSON array, nil as [].
func jsonStrings(list []string) (string, error) {
	if list == nil {
		list = []string{}
	}
	b, err := json.Marshal(list)
	return string(b), err
}

// exists runs a query of one row or none, outside any transaction of the
// executor's own; a read in WAL mode waits for no writer.
func (e *executor) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := e.q.QueryRowContext(ctx, query, args...).Scan(&one)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
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
	var ids []int64
	err = e.write(ctx, func(q querier) error {
		rows, err := q.QueryContext(ctx, queryJobHeartbeat, string(leasesJSON))
		if err != nil {
			return err
		}
		ids, err = sqlbackend.ScanIDs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	slices.Sort(ids)
	return ids, nil
}

// finishItem is the JSON form of a driver.JobFinish for queryJobFinish and
// queryAttemptInsertFinished.
type finishItem struct {
	ID          int64   `json:"id"`
	Token       int64   `json:"token"`
	State       string  `json:"state"`
	CountError  int     `json:"count_error"`
	Error       *string `json:"error"`
	ScheduledAt *int64  `json:"scheduled_at"`
	Outcome     string  `json:"outcome"`
}

// JobFinish ends the leases of params.Items in one transaction of three
// statements whatever the batch size: read the clock, one conditional
// UPDATE ... FROM json_each, one INSERT ... SELECT of the attempt rows of the
// leases it ended. It returns the IDs written in input order.
func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	// An ID given twice can be written at most once: keep its first item.
	items := make([]finishItem, 0, len(params.Items))
	seen := make(map[int64]bool, len(params.Items))
	for _, it := range params.Items {
		if seen[it.ID] {
			continue
		}
		seen[it.ID] = true
		fi := finishItem{ID: it.ID, Token: it.Token, State: string(it.State), Outcome: string(it.Outcome)}
		if it.CountError {
			fi.CountError = 1
		}
		if it.Error != "" {
			fi.Error = &it.Error
		}
		if it.ScheduledAt != nil {
			us := it.ScheduledAt.UnixMicro()
			fi.ScheduledAt = &us
		}
		items = append(items, fi)
	}
	if len(items) == 0 {
		return []int64{}, nil
	}
	itemsJSON, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("finish jobs: encode: %w", err)
	}
	var written []int64
	err = e.write(ctx, func(q querier) error {
		written = nil
		var now int64
		if err := q.QueryRowContext(ctx, queryNow).Scan(&now); err != nil {
			return fmt.Errorf("read database clock: %w", err)
		}
		rows, err := q.QueryContext(ctx, queryJobFinish, string(itemsJSON), now)
		if err != nil {
			return err
		}
		done, err := sqlbackend.ScanIDs(rows)
		if err != nil || len(done) == 0 {
			return err
		}
		isDone := make(map[int64]bool, len(done))
		for _, id := range done {
			isDone[id] = true
		}
		ended := make([]finishItem, 0, len(done))
		for _, it := range items {
			if isDone[it.ID] {
				ended = append(ended, it)
				written = append(written, it.ID)
			}
		}
		endedJSON, err := json.Marshal(ended)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, queryAttemptInsertFinished, string(endedJSON), now); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish jobs: %w", err)
	}
	if written == nil {
		written = []int64{}
	}
	return written, nil
}

// JobExpire reclaims expired leases in one transaction: an UPDATE ...
// RETURNING of the jobs, then one INSERT ... SELECT of their attempt rows.
// On the pool a read first skips the write lock when no lease has expired.
func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = 1000
	}
	if e.onPool {
		if found, err := e.exists(ctx, queryJobExpiredExists); err != nil || !found {
			if err != nil {
				return nil, fmt.Errorf("expire leases: %w", err)
			}
			return []*leasetype.JobRow{}, nil
		}
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
		if jobs, err = sqlbackend.ScanAll(rows, scanJob); err != nil || len(jobs) == 0 {
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
