package postgres

import (
	"context"
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
	cancel_requested_at,
	coalesce(flow_key, ''), coalesce(sequence_key, ''),
	coalesce(stage, ''), coalesce(stage_state::text, '')`

// attemptColumns is the select list scanAttempt reads, in its order.
const attemptColumns = `job_id, attempt, token, owner, leased_at, lease_until,
	last_heartbeat_at, heartbeats, finished_at, outcome, coalesce(error, '')`

// scanJob reads one row selected with jobColumns, after the leading
// columns scanned into lead.
func scanJob(row pgx.Row, lead ...any) (*leasetype.JobRow, error) {
	return newJobDest(lead...).scan(row)
}

// jobDest is a scan destination for rows selected with jobColumns. Its
// destination list is built once, so that scanning many rows (a claim)
// allocates only what each row keeps.
type jobDest struct {
	j     leasetype.JobRow
	state string
	pol   string
	ttlMS int64
	stage string // stage_state as text
	dest  []any
}

// newJobDest returns a destination that scans the leading columns into lead.
func newJobDest(lead ...any) *jobDest {
	d := &jobDest{}
	j := &d.j
	d.dest = append(lead, &j.ID, &j.Kind, &j.Queue, &d.state, &j.Priority, &j.EncodedArgs, &j.Metadata,
		&j.UniqueKey, &j.Attempt, &j.MaxAttempts, &j.Errors, &j.Expiries,
		&j.LastError, &j.LeaseToken, &j.LeaseOwner,
		&j.LeasedAt, &j.LeaseUntil, &j.HeartbeatAt, &j.Heartbeats,
		&d.ttlMS, &d.pol, &j.ScheduledAt, &j.CreatedAt, &j.FinalizedAt,
		&j.CancelRequestedAt,
		&j.Key, &j.Sequence,
		&j.Stage, &d.stage)
	return d
}

// scan reads one row into a new JobRow. pgx allocates a new value for
// each non-NULL pointer column, so rows never share their times.
func (d *jobDest) scan(row pgx.Row) (*leasetype.JobRow, error) {
	d.j = leasetype.JobRow{}
	if err := row.Scan(d.dest...); err != nil {
		return nil, err
	}
	j := d.j
	j.State = leasetype.JobState(d.state)
	j.ExpiryPolicy = leasetype.ExpiryPolicy(d.pol)
	j.LeaseTTL = time.Duration(d.ttlMS) * time.Millisecond
	if d.stage != "" {
		j.StageState = []byte(d.stage)
	}
	j.ScheduledAt = j.ScheduledAt.UTC()
	j.CreatedAt = j.CreatedAt.UTC()
	for _, t := range []*time.Time{j.LeasedAt, j.LeaseUntil, j.HeartbeatAt, j.FinalizedAt, j.CancelRequestedAt} {
		if t != nil {
			*t = t.UTC()
		}
	}
	return &j, nil
}

// scanJobs reads every row of rows, selected with jobColumns, and closes
// rows. max is the most rows the statement can return, 0 when unbounded.
func scanJobs(rows pgx.Rows, max int) ([]*leasetype.JobRow, error) {
	defer rows.Close()
	var (
		out  []*leasetype.JobRow
		dest *jobDest
		dec  *jobDecoder
	)
	for rows.Next() {
		if dest == nil && dec == nil {
			if fields := rows.FieldDescriptions(); binaryJobColumns(fields) {
				dec = &jobDecoder{fields: fields, left: max}
				out = make([]*leasetype.JobRow, 0, min(max, 1024))
			} else {
				dest = newJobDest()
			}
		}
		var (
			j   *leasetype.JobRow
			err error
		)
		if dec != nil {
			j, err = dec.decode(rows.RawValues())
		} else {
			j, err = dest.scan(rows)
		}
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

// queryIDs runs a statement that returns a single bigint column and reads
// it; errors name what the statement does.
func (e *executor) queryIDs(ctx context.Context, what, query string, args ...any) ([]int64, error) {
	rows, err := e.db.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, translateError(err))
	}
	ids, err := scanIDs(rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, translateError(err))
	}
	return ids, nil
}

// scanIDs reads a single bigint column and closes rows. One variable takes
// every row's value (pgx.RowTo would allocate one per row: a batch's
// outcome statement returns up to CompleterMaxBatch IDs).
func scanIDs(rows pgx.Rows) ([]int64, error) {
	defer rows.Close()
	ids := []int64{}
	var id int64
	for rows.Next() {
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return ids, nil
}
