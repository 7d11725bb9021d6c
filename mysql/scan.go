package mysql

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/leasehold/leasehold/internal/sqlbackend"
	"github.com/leasehold/leasehold/leasetype"
)

// timeLayout is how DATETIME(6) values travel as text.
const timeLayout = "2006-01-02 15:04:05.999999"

// dbTime scans a DATETIME(6) column holding UTC. It accepts the value as text
// (parseTime=false) or as a time.Time in whatever location the DSN's loc
// names (parseTime=true), reading the wall clock as UTC either way, so the
// driver works on any *sql.DB.
type dbTime struct {
	Time  time.Time
	Valid bool
}

// Scan implements sql.Scanner.
func (t *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*t = dbTime{}
		return nil
	case time.Time:
		if v.Location() != time.UTC {
			v = time.Date(v.Year(), v.Month(), v.Day(), v.Hour(), v.Minute(), v.Second(), v.Nanosecond(), time.UTC)
		}
		*t = dbTime{Time: v, Valid: true}
		return nil
	case []byte:
		return t.parse(string(v))
	case string:
		return t.parse(v)
	}
	return fmt.Errorf("scan time: unsupported type %T", src)
}

func (t *dbTime) parse(s string) error {
	v, err := time.ParseInLocation(timeLayout, s, time.UTC)
	if err != nil {
		return fmt.Errorf("scan time: %w", err)
	}
	*t = dbTime{Time: v, Valid: true}
	return nil
}

// intOf reads an integer column's value without database/sql's
// reflection, which turns an int64 into text and back for an int
// destination: go-sql-driver hands integers over as int64 (uint64 for an
// unsigned BIGINT), and text is parsed. It reports false for NULL.
func intOf(src any) (int64, bool, error) {
	switch v := src.(type) {
	case int64:
		return v, true, nil
	case nil:
		return 0, false, nil
	case uint64:
		if v > math.MaxInt64 {
			return 0, false, fmt.Errorf("scan integer: %d overflows int64", v)
		}
		return int64(v), true, nil
	case []byte:
		return parseInt(string(v))
	case string:
		return parseInt(v)
	}
	return 0, false, fmt.Errorf("scan integer: unsupported type %T", src)
}

func parseInt(s string) (int64, bool, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("scan integer: %w", err)
	}
	return v, true, nil
}

// errNullInt is a NULL in a column scanned as a NOT NULL integer.
var errNullInt = errors.New("scan integer: NULL")

// intInto scans a NOT NULL integer column into *p, as intOf reads it. A
// value of one pointer, it needs no allocation to become the Scan
// argument.
type intInto struct{ p *int }

// Scan implements sql.Scanner.
func (d intInto) Scan(src any) error {
	v, ok, err := intOf(src)
	if err == nil && !ok {
		err = errNullInt
	}
	*d.p = int(v)
	return err
}

// int64Into is intInto for an int64.
type int64Into struct{ p *int64 }

// Scan implements sql.Scanner.
func (d int64Into) Scan(src any) error {
	v, ok, err := intOf(src)
	if err == nil && !ok {
		err = errNullInt
	}
	*d.p = v
	return err
}

// msInto scans a column of milliseconds, or NULL for zero, into *p.
type msInto struct{ p *time.Duration }

// Scan implements sql.Scanner.
func (d msInto) Scan(src any) error {
	v, _, err := intOf(src)
	*d.p = time.Duration(v) * time.Millisecond
	return err
}

// ptr returns the time, or nil when NULL.
func (t dbTime) ptr() *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time
	return &v
}

// timeArg is the statement argument for a time: UTC text that the SQL casts
// with CAST(? AS DATETIME(6)); nil stays NULL.
func timeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UTC().Format("2006-01-02 15:04:05.000000")
}

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
		j                                   leasetype.JobRow
		uniqueKey, lastError, leaseOwner    sql.NullString
		leasedAt, leaseUntil, heartbeatAt   dbTime
		scheduledAt, createdAt, finalizedAt dbTime
		cancelRequestedAt                   dbTime
		stage, stageState                   sql.NullString
		state, expiryPolicy                 string
		args, metadata                      []byte
		flowKey, sequenceKey                sql.NullString
	)
	err := s.Scan(
		int64Into{&j.ID}, &j.Kind, &j.Queue, &state, intInto{&j.Priority}, &args, &metadata, &uniqueKey,
		intInto{&j.Attempt}, intInto{&j.MaxAttempts}, intInto{&j.Errors}, intInto{&j.Expiries}, &lastError,
		int64Into{&j.LeaseToken}, &leaseOwner, &leasedAt, &leaseUntil, &heartbeatAt, intInto{&j.Heartbeats},
		msInto{&j.LeaseTTL}, &expiryPolicy, &scheduledAt, &createdAt, &finalizedAt,
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
	j.LeasedAt = leasedAt.ptr()
	j.LeaseUntil = leaseUntil.ptr()
	j.HeartbeatAt = heartbeatAt.ptr()
	j.ExpiryPolicy = leasetype.ExpiryPolicy(expiryPolicy)
	j.ScheduledAt = scheduledAt.Time
	j.CreatedAt = createdAt.Time
	j.FinalizedAt = finalizedAt.ptr()
	j.CancelRequestedAt = cancelRequestedAt.ptr()
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
		a                                    leasetype.AttemptRow
		leasedAt, until, finishedAt, heartAt dbTime
		outcome                              string
		errText                              sql.NullString
	)
	err := s.Scan(&a.JobID, &a.Attempt, &a.Token, &a.Owner, &leasedAt, &until,
		&heartAt, &a.Heartbeats, &finishedAt, &outcome, &errText)
	if err != nil {
		return nil, err
	}
	a.LeasedAt = leasedAt.Time
	a.LeaseUntil = until.Time
	a.LastHeartbeatAt = heartAt.ptr()
	a.FinishedAt = finishedAt.Time
	a.Outcome = leasetype.AttemptOutcome(outcome)
	a.Error = errText.String
	return &a, nil
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// leaseTTLArg is the lease_ttl_ms value for a per-job TTL: whole
// milliseconds rounded up, so a positive TTL never becomes zero; NULL for zero.
func leaseTTLArg(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
