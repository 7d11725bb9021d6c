package mysql

import (
	"bytes"
	"database/sql"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// driverRow hands a row of jobColumns to Scan as go-sql-driver does on
// the text protocol with parseTime: integers as int64, times as
// time.Time, text and JSON as bytes of its own buffer, which scribble
// overwrites, as the driver reuses its read buffer for the next row. It
// allocates nothing of its own in Scan.
type driverRow struct {
	values []any  // strings stand for the bytes of text columns
	srcs   []any  // values as handed over: the strings as slices of buf
	text   []byte // the strings, one after the other
	buf    []byte
}

// newDriverRow returns the row of values.
func newDriverRow(values ...any) *driverRow {
	r := &driverRow{values: values}
	for _, v := range values {
		if s, ok := v.(string); ok {
			r.text = append(r.text, s...)
		}
	}
	r.buf = make([]byte, len(r.text))
	off := 0
	for _, v := range values {
		s, ok := v.(string)
		if !ok {
			r.srcs = append(r.srcs, v)
			continue
		}
		r.srcs = append(r.srcs, r.buf[off:off+len(s):off+len(s)])
		off += len(s)
	}
	return r
}

// Scan implements sqlbackend.RowScanner.
func (r *driverRow) Scan(dest ...any) error {
	if len(dest) != len(r.srcs) {
		return fmt.Errorf("%d destinations for %d columns", len(dest), len(r.srcs))
	}
	copy(r.buf, r.text)
	for i, src := range r.srcs {
		if err := assign(dest[i], src); err != nil {
			return fmt.Errorf("column %d: %w", i, err)
		}
	}
	return nil
}

// assign stores src in dest as database/sql would for the destinations a
// row of jobs is read into: a sql.Scanner, or a string or byte slice
// (copies, as database/sql makes them).
func assign(dest, src any) error {
	switch d := dest.(type) {
	case sql.Scanner:
		return d.Scan(src)
	case *string:
		b, ok := src.([]byte)
		if !ok {
			return fmt.Errorf("cannot store %T in a string", src)
		}
		*d = string(b)
	case *[]byte:
		b, ok := src.([]byte)
		if !ok {
			return fmt.Errorf("cannot store %T in a byte slice", src)
		}
		*d = bytes.Clone(b)
	default:
		return fmt.Errorf("unsupported destination %T", dest)
	}
	return nil
}

// scribble overwrites the buffer the last row's bytes were in.
func (r *driverRow) scribble() {
	for i := range r.buf {
		r.buf[i] = '#'
	}
}

// TestJobScanReadsARow: a jobScan reads every column of jobColumns into
// its JobRow, keeps none of the driver's memory (the driver overwrites its
// buffer after the row), and, reused for the rows of a result set with its
// names, allocates no more per row than the JobRow, its JSON documents,
// its flow key and one block for its times: the destinations and the
// strings of few values are the jobScan's.
func TestJobScanReadsARow(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	row := newDriverRow(
		int64(42), "payments.charge", "q", "running", int64(2), `{"n":1}`, `{"m":2}`, nil,
		int64(3), int64(25), int64(1), int64(0), nil,
		int64(7), "worker-1", at, at.Add(time.Minute), nil, int64(0),
		int64(1500), "retry", at.Add(-time.Hour), at.Add(-2*time.Hour), nil,
		nil,
		"flow-9", nil, "charge", `{"s":1}`,
	)
	want := &leasetype.JobRow{
		ID: 42, Kind: "payments.charge", Queue: "q", State: leasetype.JobStateRunning, Priority: 2,
		EncodedArgs: []byte(`{"n":1}`), Metadata: []byte(`{"m":2}`),
		Attempt: 3, MaxAttempts: 25, Errors: 1,
		LeaseToken: 7, LeaseOwner: "worker-1", LeasedAt: &at, LeaseUntil: ptrTo(at.Add(time.Minute)),
		LeaseTTL: 1500 * time.Millisecond, ExpiryPolicy: leasetype.ExpiryPolicy("retry"),
		ScheduledAt: at.Add(-time.Hour), CreatedAt: at.Add(-2 * time.Hour),
		Key: "flow-9", Stage: "charge", StageState: []byte(`{"s":1}`),
	}
	s := newJobScan(nil, true)
	got, err := s.scan(row)
	if err != nil {
		t.Fatal(err)
	}
	row.scribble()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("scanned\n%+v\nwant\n%+v", got, want)
	}
	single, err := scanJob(row)
	if err != nil || !reflect.DeepEqual(single, want) {
		t.Errorf("scanJob read %+v, %v; want %+v", single, err, want)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := s.scan(row); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 6 {
		t.Errorf("%.0f allocations a row, want at most 6 (the JobRow, its args, metadata, stage state and flow key, one block for its times)", allocs)
	}
}

// TestJobScanRefusesNullText: the NOT NULL text columns refuse NULL, as a
// string destination does.
func TestJobScanRefusesNullText(t *testing.T) {
	values := make([]any, len(newJobScan(nil, false).dest))
	for i := range values {
		values[i] = int64(1)
	}
	values[1] = nil // kind
	values[2], values[3], values[20] = "q", "running", "retry"
	for _, c := range []int{5, 6} {
		values[c] = "{}"
	}
	for _, c := range []int{7, 12, 14, 15, 16, 17, 21, 22, 23, 24, 25, 26, 27, 28} {
		values[c] = nil
	}
	row := newDriverRow(values...)
	if _, err := scanJob(row); err == nil {
		t.Error("scanJob read a row without a kind")
	}
}

func ptrTo[T any](v T) *T { return &v }
