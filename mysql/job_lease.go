package mysql

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/leasehold/leasehold/driver"
	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// JobClaim leases up to params.Max jobs of params.Queue in one short
// transaction: a SELECT ... FOR UPDATE SKIP LOCKED of the jobs in claim
// order, one UPDATE of exactly those rows (fencing token and attempt up by
// one), and a read of them. On the pool an empty or paused queue is seen by a
// read first, without a transaction. params.Kinds and params.ExcludeKinds
// add a kind filter to both; without them the statements are the plain ones.
func (e *executor) JobClaim(ctx context.Context, params *driver.JobClaimParams) ([]*leasetype.JobRow, error) {
	if err := e.open(); err != nil {
		return nil, err
	}
	existsQuery, pickQuery := queryJobClaimableExists, queryJobClaimPick
	filter, filterArgs := claimKindFilter(params.Kinds, params.ExcludeKinds)
	if filter != "" {
		existsQuery, pickQuery = fmt.Sprintf(jobClaimableExists, filter), fmt.Sprintf(jobClaimPick, filter)
	}
	pickArgs := append([]any{params.Queue, params.Queue}, filterArgs...)
	if e.onPool {
		found, err := e.exists(ctx, existsQuery, pickArgs...)
		if err != nil {
			return nil, fmt.Errorf("claim jobs: %w", err)
		}
		if !found {
			return []*leasetype.JobRow{}, nil
		}
	}
	kinds := make([]string, 0, len(params.KindLeaseTTL))
	for kind := range params.KindLeaseTTL {
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	ttlExpr, stuckExpr := "NULL", "FALSE"
	var ttlArgs, stuckArgs []any
	if len(kinds) > 0 {
		var b strings.Builder
		b.WriteString("CASE kind")
		for _, kind := range kinds {
			b.WriteString(" WHEN ? THEN ?")
			ttlArgs = append(ttlArgs, kind, params.KindLeaseTTL[kind].Microseconds())
		}
		b.WriteString(" END")
		ttlExpr = b.String()
	}
	if len(params.StuckKinds) > 0 {
		stuckExpr = "kind IN (" + placeholders(len(params.StuckKinds)) + ")"
		for _, kind := range params.StuckKinds {
			stuckArgs = append(stuckArgs, kind)
		}
	}

	var jobs []*leasetype.JobRow
	err := e.writeInDriverTx(ctx, func(q querier) error {
		jobs = []*leasetype.JobRow{}
		ids, now, err := pick(ctx, q, pickQuery, append(slices.Clip(pickArgs), max(params.Max, 1))...)
		if err != nil || len(ids) == 0 {
			return err
		}
		args := []any{params.Owner, now, now}
		args = append(args, ttlArgs...)
		args = append(args, params.DefaultLeaseTTL.Microseconds())
		args = append(args, stuckArgs...)
		args = append(args, idArgs(ids)...)
		update := fmt.Sprintf(jobClaimUpdate, ttlExpr, stuckExpr, placeholders(len(ids)))
		if _, err := q.ExecContext(ctx, update, args...); err != nil {
			return err
		}
		byID, err := jobsByID(ctx, q, ids)
		if err != nil {
			return fmt.Errorf("read claimed jobs: %w", err)
		}
		for _, j := range byID {
			jobs = append(jobs, j)
		}
		return nil
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

// claimKindFilter returns the SQL that restricts a claim to kinds (when not
// empty) and away from exclude, and its arguments; "" for a plain claim.
func claimKindFilter(kinds, exclude []string) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	for _, f := range []struct {
		sql   string
		kinds []string
	}{{" AND kind IN (", kinds}, {" AND kind NOT IN (", exclude}} {
		if len(f.kinds) == 0 {
			continue
		}
		b.WriteString(f.sql + placeholders(len(f.kinds)) + ")")
		for _, k := range f.kinds {
			args = append(args, k)
		}
	}
	return b.String(), args
}

// exists runs a query of one row or none on the executor's querier.
func (e *executor) exists(ctx context.Context, query string, args ...any) (bool, error) {
	var one int
	err := e.q.QueryRowContext(ctx, query, args...).Scan(&one)
	if isNoRows(err) {
		return false, nil
	}
	return err == nil, err
}

// pick runs a locking read of (id, database clock) rows and returns the IDs,
// without repeats, and the clock as a statement argument.
func pick(ctx context.Context, q querier, query string, args ...any) ([]int64, any, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var (
		ids  []int64
		now  dbTime
		seen = map[int64]bool{}
	)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &now); err != nil {
			return nil, nil, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return ids, timeArg(&now.Time), nil
}

// leaseRenewal is the JSON form of a driver.LeaseRenewal for jsonLeases.
type leaseRenewal struct {
	ID    int64 `json:"id"`
	Token int64 `json:"token"`
	TTLUS int64 `json:"ttl_us"`
}

// JobHeartbeat renews leases in one transaction whatever the batch size: a
// locking read of the leases still held, then one UPDATE ... JOIN JSON_TABLE
// of exactly those.
func (e *executor) JobHeartbeat(ctx context.Context, params *driver.JobHeartbeatParams) ([]int64, error) {
	if len(params.Leases) == 0 {
		return []int64{}, nil
	}
	leases := make([]leaseRenewal, len(params.Leases))
	for i, l := range params.Leases {
		leases[i] = leaseRenewal{ID: l.ID, Token: l.Token, TTLUS: l.TTL.Microseconds()}
	}
	leasesJSON, err := json.Marshal(leases)
	if err != nil {
		return nil, fmt.Errorf("renew leases: encode: %w", err)
	}
	var renewed []int64
	err = e.write(ctx, func(q querier) error {
		ids, now, err := pick(ctx, q, queryJobHeartbeatPick, string(leasesJSON))
		if err != nil || len(ids) == 0 {
			renewed = nil
			return err
		}
		held := keep(leases, ids, func(l leaseRenewal) int64 { return l.ID })
		heldJSON, err := json.Marshal(held)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, queryJobHeartbeat, string(heldJSON), now, now); err != nil {
			return err
		}
		renewed = ids
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	if renewed == nil {
		renewed = []int64{}
	}
	slices.Sort(renewed)
	return renewed, nil
}

// keep returns the items whose ID is in ids, the first item of each ID only.
func keep[T any](items []T, ids []int64, id func(T) int64) []T {
	want := make(map[int64]bool, len(ids))
	for _, i := range ids {
		want[i] = true
	}
	out := make([]T, 0, len(ids))
	for _, it := range items {
		if want[id(it)] {
			out = append(out, it)
			delete(want, id(it))
		}
	}
	return out
}

// finishItem is the JSON form of a driver.JobFinish for jsonFinish. Absent
// keys read as NULL.
type finishItem struct {
	ID          int64   `json:"id"`
	Token       int64   `json:"token"`
	State       string  `json:"state"`
	Outcome     string  `json:"outcome"`
	CountError  int     `json:"count_error"`
	Error       *string `json:"error,omitempty"`
	ScheduledAt any     `json:"scheduled_at,omitempty"`
}

// finishStates are the states a lease may end in.
var finishStates = []leasetype.JobState{
	leasetype.JobStateCompleted, leasetype.JobStateRetryable, leasetype.JobStateDiscarded,
	leasetype.JobStateCancelled, leasetype.JobStateAvailable, leasetype.JobStateScheduled,
}

// JobFinish ends the leases of params.Items in one transaction of three
// statements whatever the batch size: a locking read of the leases still
// held, one INSERT ... SELECT of their attempt rows and one UPDATE ... JOIN
// JSON_TABLE of their jobs. It returns the IDs written in input order.
func (e *executor) JobFinish(ctx context.Context, params *driver.JobFinishParams) ([]int64, error) {
	// An ID given twice can be written at most once: keep its first item.
	items := make([]finishItem, 0, len(params.Items))
	seen := make(map[int64]bool, len(params.Items))
	for _, it := range params.Items {
		if !slices.Contains(finishStates, it.State) {
			return nil, fmt.Errorf("finish leases: job %d: cannot end a lease in state %q", it.ID, it.State)
		}
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
			fi.ScheduledAt = timeArg(it.ScheduledAt)
		}
		items = append(items, fi)
	}
	if len(items) == 0 {
		return []int64{}, nil
	}
	itemsJSON, err := json.Marshal(items)
	if err != nil {
		return nil, fmt.Errorf("finish leases: encode: %w", err)
	}
	var written []int64
	err = e.write(ctx, func(q querier) error {
		written = []int64{}
		ids, now, err := pick(ctx, q, queryJobFinishPick, string(itemsJSON))
		if err != nil || len(ids) == 0 {
			return err
		}
		held := keep(items, ids, func(f finishItem) int64 { return f.ID })
		heldJSON, err := json.Marshal(held)
		if err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, queryAttemptInsertFinished, now, string(heldJSON)); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		if _, err := q.ExecContext(ctx, queryJobFinish, string(heldJSON), now, now, now); err != nil {
			return err
		}
		for _, it := range held {
			written = append(written, it.ID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("finish leases: %w", err)
	}
	return written, nil
}

// expireCandidates lists running jobs whose lease expired, locking nothing.
func (e *executor) expireCandidates(ctx context.Context, limit int) ([]int64, error) {
	q, err := e.read()
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, queryJobExpireCandidates, limit)
	if err != nil {
		return nil, err
	}
	return sqlbackend.ScanIDs(rows)
}

// defaultExpireLimit is JobExpire's limit when the caller sets none.
const defaultExpireLimit = 1000

// JobExpire reclaims expired leases in one transaction: a SELECT ... FOR
// UPDATE SKIP LOCKED of the expired jobs (so concurrent watchers never
// reclaim one twice), one UPDATE of those rows, one INSERT ... SELECT of their
// attempt rows, and a read of the rows.
func (e *executor) JobExpire(ctx context.Context, params *driver.JobExpireParams) ([]*leasetype.JobRow, error) {
	limit := params.Limit
	if limit <= 0 {
		limit = defaultExpireLimit
	}
	candidates, err := e.expireCandidates(ctx, limit)
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	jobs := []*leasetype.JobRow{}
	if len(candidates) == 0 {
		return jobs, nil
	}
	err = e.write(ctx, func(q querier) error {
		jobs = []*leasetype.JobRow{}
		ids, now, err := pick(ctx, q, fmt.Sprintf(queryJobExpirePick, placeholders(len(candidates))), idArgs(candidates)...)
		if err != nil || len(ids) == 0 {
			return err
		}
		m := params.MaxExpiries
		args := append([]any{m, m, m, m, now, m, m, now}, idArgs(ids)...)
		if _, err := q.ExecContext(ctx, fmt.Sprintf(jobExpire, placeholders(len(ids))), args...); err != nil {
			return err
		}
		args = append([]any{now}, idArgs(ids)...)
		if _, err := q.ExecContext(ctx, fmt.Sprintf(jobAttemptInsertExpired, placeholders(len(ids))), args...); err != nil {
			return fmt.Errorf("record attempts: %w", err)
		}
		byID, err := jobsByID(ctx, q, ids)
		if err != nil {
			return fmt.Errorf("read expired jobs: %w", err)
		}
		for _, j := range byID {
			jobs = append(jobs, j)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	slices.SortFunc(jobs, func(a, b *leasetype.JobRow) int { return cmp.Compare(a.ID, b.ID) })
	return jobs, nil
}
