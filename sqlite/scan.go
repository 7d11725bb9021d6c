package sqlite

import (
	"database/sql"
	"time"

	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// jobColumns are the job columns in the order scanJob reads them.
const jobColumns = `id, kind, queue, state, priority, args, metadata, unique_key,
	attempt, max_attempts, errors, expiries, last_error,
	lease_token, lease_owner, leased_at, lease_until, heartbeat_at, heartbeats,
	lease_ttl_ms, expiry_policy, scheduled_at, created_at, finalized_at,
	cancel_requested_at,
	flow_key, sequence_key, stage, stage_state`

// attemptColumns are the attempt columns in the order scanAttempt reads them.
const attemptColumns = `job_id, attempt, token, owner, leased_at, lease_until,
	last_heartbeat_at, heartbeats, finished_at, outcome, error`

// scanJob reads a row selected with jobColumns.
func scanJob(s sqlbackend.RowScanner) (*leasetype.JobRow, error) {
	var (
		j                                        leasetype.JobRow
		uniqueKey, lastError, leaseOwner         sql.NullString
		leasedAt, leaseUntil, heartbeatAt, ttlMS sql.NullInt64
		finalizedAt, cancelRequestedAt           sql.NullInt64
		stage, stageState                        sql.NullString
		scheduledAt, createdAt                   int64
		state, expiryPolicy                      string
		args, metadata                           []byte
		flowKey, sequenceKey                     sql.NullString
	)
	err := s.Scan(
		&j.ID, &j.Kind, &j.Queue, &state, &j.Priority, &args, &metadata, &uniqueKey,
		&j.Attempt, &j.MaxAttempts, &j.Errors, &j.Expiries, &lastError,
		&j.LeaseToken, &leaseOwner, &leasedAt, &leaseUntil, &heartbeatAt, &j.Heartbeats,
		&ttlMS, &expiryPolicy, &scheduledAt, &createdAt, &finalizedAt,
		&cancelRequestedAt,
		&flowKey, &sequenceKey, &stage, &stageState,
	)
	if err != nil {
		return nil, err
	}
	j.State = leasetype.JobState(state)
	j.EncodedArgs = args
	j.Metadata = metadata
	j.UniqueKey = uniqueKey.String
	j.LastError = lastError.String
	j.LeaseOwner = leaseOwner.String
	j.LeasedAt = nullTime(leasedAt)
	j.LeaseUntil = nullTime(leaseUntil)
	j.HeartbeatAt = nullTime(heartbeatAt)
	if ttlMS.Valid {
		j.LeaseTTL = time.Duration(ttlMS.Int64) * time.Millisecond
	}
	j.ExpiryPolicy = leasetype.ExpiryPolicy(expiryPolicy)
	j.ScheduledAt = fromMicros(scheduledAt)
	j.CreatedAt = fromMicros(createdAt)
	j.FinalizedAt = nullTime(finalizedAt)
	j.CancelRequestedAt = nullTime(cancelRequestedAt)
	j.Key, j.Sequence = flowKey.String, sequenceKey.String
	j.Stage = stage.String
	if stageState.Valid {
		j.StageState = []byte(stageState.String)
	}
	return &j, nil
}

// scanAttempt reads a row selected with attemptColumns.
func scanAttempt(s sqlbackend.RowScanner) (*leasetype.AttemptRow, error) {
	var (
		a                           leasetype.AttemptRow
		leasedAt, until, finishedAt int64
		heartbeatAt                 sql.NullInt64
		outcome                     string
		errText                     sql.NullString
	)
	err := s.Scan(&a.JobID, &a.Attempt, &a.Token, &a.Owner, &leasedAt, &until,
		&heartbeatAt, &a.Heartbeats, &finishedAt, &outcome, &errText)
	if err != nil {
		return nil, err
	}
	a.LeasedAt = fromMicros(leasedAt)
	a.LeaseUntil = fromMicros(until)
	a.LastHeartbeatAt = nullTime(heartbeatAt)
	a.FinishedAt = fromMicros(finishedAt)
	a.Outcome = leasetype.AttemptOutcome(outcome)
	a.Error = errText.String
	return &a, nil
}

// fromMicros converts stored microseconds since the Unix epoch to a UTC time.
func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func nullTime(us sql.NullInt64) *time.Time {
	if !us.Valid {
		return nil
	}
	t := fromMicros(us.Int64)
	return &t
}

// micros converts a time to the stored form; nil stays NULL.
func micros(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMicro()
}

// millis converts a lease duration to whole milliseconds, rounding up so
// that a positive duration never becomes zero; zero stays NULL.
func millis(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
