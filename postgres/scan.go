package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leasehold/leasehold/leasetype"
)

// jobColumns is the select list scanJob reads, in its order. NULL text columns
// come back as "" and a NULL lease_ttl_ms as 0.
const jobColumns = `id, kind, queue, state, priority, args, metadata,
	coalesce(unique_key, ''), attempt, max_attempts, errors, expiries,
	coalesce(last_error, ''), lease_token, coalesce(lease_owner, ''),
	leased_at, lease_until, heartbeat_at, heartbeats,
	coalesce(lease_ttl_ms, 0), expiry_policy, scheduled_at, created_at, finalized_at,
	cancel_requested_at`

// attemptColumns is the select list scanAttempt reads, in its order.
const attemptColumns = `job_id, attempt, token, owner, leased_at, lease_until,
	last_heartbeat_at, heartbeats, finished_at, outcome, coalesce(error, '')`

// scanJob reads one row selected with jobColumns, after the leading
// columns scanned into lead.
func scanJob(row pgx.Row, lead ...any) (*leasetype.JobRow, error) {
	var (
		j     leasetype.JobRow
		state string
		pol   string
		ttlMS int64
	)
	dest := append(lead, &j.ID, &j.Kind, &j.Queue, &state, &j.Priority, &j.EncodedArgs, &j.Metadata,
		&j.UniqueKey, &j.Attempt, &j.MaxAttempts, &j.Errors, &j.Expiries,
		&j.LastError, &j.LeaseToken, &j.LeaseOwner,
		&j.LeasedAt, &j.LeaseUntil, &j.HeartbeatAt, &j.Heartbeats,
		&ttlMS, &pol, &j.ScheduledAt, &j.CreatedAt, &j.FinalizedAt,
		&j.CancelRequestedAt)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	j.State = leasetype.JobState(state)
	j.ExpiryPolicy = leasetype.ExpiryPolicy(pol)
	j.LeaseTTL = time.Duration(ttlMS) * time.Millisecond
	j.ScheduledAt = j.ScheduledAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	j.LeasedAt = utcPtr(j.LeasedAt)
	j.LeaseUntil = utcPtr(j.LeaseUntil)
	j.HeartbeatAt = utcPtr(j.HeartbeatAt)
	j.FinalizedAt = utcPtr(j.FinalizedAt)
	j.CancelRequestedAt = utcPtr(j.CancelRequestedAt)
	return &j, nil
}

// scanJobs reads every row of rows with scanJob and closes rows.
func scanJobs(rows pgx.Rows) ([]*leasetype.JobRow, error) {
	defer rows.Close()
	var out []*leasetype.JobRow
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("scan job: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// scanAttempt reads one row selected with attemptColumns.
func scanAttempt(row pgx.Row) (*leasetype.AttemptRow, error) {
	var (
		a       leasetype.AttemptRow
		outcome string
	)
	err := row.Scan(&a.JobID, &a.Attempt, &a.Token, &a.Owner, &a.LeasedAt, &a.LeaseUntil,
		&a.LastHeartbeatAt, &a.Heartbeats, &a.FinishedAt, &outcome, &a.Error)
	if err != nil {
		return nil, err
	}
	a.Outcome = leasetype.AttemptOutcome(outcome)
	a.LeasedAt = a.LeasedAt.UTC()
	a.LeaseUntil = a.LeaseUntil.UTC()
	a.FinishedAt = a.FinishedAt.UTC()
	a.LastHeartbeatAt = utcPtr(a.LastHeartbeatAt)
	return &a, nil
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// scanIDs reads a single bigint column and closes rows.
func scanIDs(rows pgx.Rows) ([]int64, error) {
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	if ids == nil {
		ids = []int64{}
	}
	return ids, nil
}
