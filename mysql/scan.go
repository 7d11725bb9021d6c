package mysql

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
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
	return newJobScan(nil, false).scan(s)
}

// jobScan is what a row of jobColumns is read into on its way to a
// leasetype.JobRow: every destination in one value, with the Scan
// arguments that point into it, so that reading a row allocates little
// more than what the JobRow keeps, and the rows of a result set read with
// one jobScan (a claim's) share its allocation. Its text columns keep no
// memory of the driver's: each becomes a string of its own, or, for the
// columns of few values (kind, queue, state, owner, expiry policy,
// stage), one of the jobScan's names when it has them.
type jobScan struct {
	id, leaseToken                                  int64
	priority, attempt, maxAttempts, errs, expiries  int
	heartbeats                                      int
	leaseTTL                                        time.Duration
	kind, queue, state, expiryPolicy, leaseOwner    text
	uniqueKey, lastError, flowKey, sequenceKey      text
	stage                                           text
	args, metadata, stageState                      blob
	leasedAt, leaseUntil, heartbeatAt               dbTime
	scheduledAt, createdAt, finalizedAt, cancelReqd dbTime
	names                                           map[string]string
	dest                                            []any
}

// maxNames bounds the names a jobScan keeps: past it, values are copied.
const maxNames = 256

// newJobScan returns a jobScan whose Scan arguments follow lead; with
// intern, it keeps the values of the columns of few values as names, for
// a result set of many rows.
func newJobScan(lead []any, intern bool) *jobScan {
	s := &jobScan{}
	if intern {
		s.names = make(map[string]string)
		for _, t := range []*text{&s.kind, &s.queue, &s.state, &s.expiryPolicy, &s.leaseOwner, &s.stage} {
			t.names = s.names
		}
	}
	s.dest = append(slices.Clip(lead),
		int64Into{&s.id}, &s.kind, &s.queue, &s.state, intInto{&s.priority}, &s.args, &s.metadata, &s.uniqueKey,
		intInto{&s.attempt}, intInto{&s.maxAttempts}, intInto{&s.errs}, intInto{&s.expiries}, &s.lastError,
		int64Into{&s.leaseToken}, &s.leaseOwner, &s.leasedAt, &s.leaseUntil, &s.heartbeatAt, intInto{&s.heartbeats},
		msInto{&s.leaseTTL}, &s.expiryPolicy, &s.scheduledAt, &s.createdAt, &s.finalizedAt,
		&s.cancelReqd,
		&s.flowKey, &s.sequenceKey, &s.stage, &s.stageState,
	)
	return s
}

// scan reads the next row of r into a new JobRow: the lead destinations
// first, then the job's columns.
func (s *jobScan) scan(r sqlbackend.RowScanner) (*leasetype.JobRow, error) {
	if err := s.read(r); err != nil {
		return nil, err
	}
	return s.row(), nil
}

// read reads the next row of r into s.
func (s *jobScan) read(r sqlbackend.RowScanner) error {
	if err := r.Scan(s.dest...); err != nil {
		return err
	}
	for _, t := range []*text{&s.kind, &s.queue, &s.state, &s.expiryPolicy} {
		if !t.valid {
			return errors.New("scan job: NULL in a NOT NULL text column")
		}
	}
	return nil
}

// row returns the JobRow of what s read last. Its time pointers share one
// allocation; its byte slices are its own.
func (s *jobScan) row() *leasetype.JobRow {
	j := &leasetype.JobRow{
		ID: s.id, Kind: s.kind.s, Queue: s.queue.s, State: leasetype.JobState(s.state.s), Priority: s.priority,
		EncodedArgs: s.args.b, Metadata: s.metadata.b, UniqueKey: s.uniqueKey.s,
		Attempt: s.attempt, MaxAttempts: s.maxAttempts, Errors: s.errs, Expiries: s.expiries, LastError: s.lastError.s,
		LeaseToken: s.leaseToken, LeaseOwner: s.leaseOwner.s, Heartbeats: s.heartbeats,
		LeaseTTL: s.leaseTTL, ExpiryPolicy: leasetype.ExpiryPolicy(s.expiryPolicy.s),
		ScheduledAt: s.scheduledAt.Time, CreatedAt: s.createdAt.Time,
		Key: s.flowKey.s, Sequence: s.sequenceKey.s, Stage: s.stage.s,
	}
	if s.stageState.valid {
		j.StageState = s.stageState.b
	}
	times := timePtrs(s.leasedAt, s.leaseUntil, s.heartbeatAt, s.finalizedAt, s.cancelReqd)
	j.LeasedAt, j.LeaseUntil, j.HeartbeatAt, j.FinalizedAt, j.CancelRequestedAt = times[0], times[1], times[2], times[3], times[4]
	return j
}

// timePtrs returns a pointer to each valid time of ts and nil for the
// others; the times pointed to share one allocation.
func timePtrs(ts ...dbTime) [5]*time.Time {
	var out [5]*time.Time
	n := 0
	for _, t := range ts {
		if t.Valid {
			n++
		}
	}
	if n == 0 {
		return out
	}
	block := make([]time.Time, 0, n)
	for i, t := range ts[:len(out)] {
		if t.Valid {
			block = append(block, t.Time)
			out[i] = &block[len(block)-1]
		}
	}
	return out
}

// text scans a text column; NULL reads as "" (not valid). It copies the
// driver's bytes, or takes the string from names when it has one.
type text struct {
	s     string
	valid bool
	names map[string]string
}

// Scan implements sql.Scanner.
func (t *text) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		t.s, t.valid = "", false
	case []byte:
		t.s, t.valid = t.name(v), true
	case string:
		t.s, t.valid = v, true
	default:
		return fmt.Errorf("scan text: unsupported type %T", src)
	}
	return nil
}

// name returns b as a string: one of names when it has it (and keeps it
// when there is room), a copy otherwise.
func (t *text) name(b []byte) string {
	if t.names == nil {
		return string(b)
	}
	if s, ok := t.names[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(t.names) < maxNames {
		t.names[s] = s
	}
	return s
}

// blob scans a binary or JSON column into a copy of its own; NULL reads as
// nil (not valid).
type blob struct {
	b     []byte
	valid bool
}

// Scan implements sql.Scanner.
func (x *blob) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*x = blob{}
	case []byte:
		*x = blob{b: bytes.Clone(v), valid: true}
	case string:
		*x = blob{b: []byte(v), valid: true}
	default:
		return fmt.Errorf("scan bytes: unsupported type %T", src)
	}
	return nil
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
