package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/leasehold/leasehold/leasetype"
)

// Rows selected with jobColumns are decoded straight from the wire when
// every column came back with the type we selected and the numbers and
// times in the binary format (pgx's default protocol asks for binary
// numbers and times, text for text, either for jsonb); otherwise, as with
// the simple protocol, pgx's generic Scan reads them. A claim returns up to a thousand rows per
// statement, and the generic path (a plan and an allocation per column)
// was a tenth of the client's CPU in a drain.
//
// The direct decoder allocates rows, times and short JSON values in blocks
// shared by the rows of one result, and returns the repeated texts (kind,
// queue, state, owner, policy) as one string per result. A row kept after
// its job ended keeps its block alive: a few tens of kilobytes at most.

// jobColumnTypes is the type OID of each column of jobColumns, in order.
var jobColumnTypes = [...]uint32{
	pgtype.Int8OID, pgtype.TextOID, pgtype.TextOID, pgtype.TextOID, pgtype.Int2OID,
	pgtype.JSONBOID, pgtype.JSONBOID, pgtype.TextOID, pgtype.Int4OID, pgtype.Int4OID,
	pgtype.Int4OID, pgtype.Int4OID, pgtype.TextOID, pgtype.Int8OID, pgtype.TextOID,
	pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.Int4OID, pgtype.Int8OID,
	pgtype.TextOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID, pgtype.TimestamptzOID,
	pgtype.TextOID, pgtype.TextOID, // flow_key, sequence_key
	pgtype.TextOID, pgtype.TextOID, // stage, stage_state
}

// binaryJobColumns reports whether rows can be read with jobDecoder: the
// types are jobColumns' and the numbers and times are in binary. A text
// value is the same in both formats, a jsonb one differs by a leading
// version byte, which jobDecoder reads by the column's format.
func binaryJobColumns(fields []pgconn.FieldDescription) bool {
	if len(fields) != len(jobColumnTypes) {
		return false
	}
	for i, f := range fields {
		if f.DataTypeOID != jobColumnTypes[i] {
			return false
		}
		switch f.DataTypeOID {
		case pgtype.TextOID, pgtype.JSONBOID:
		default:
			if f.Format != pgx.BinaryFormatCode {
				return false
			}
		}
	}
	return true
}

// Block sizes of jobDecoder.
const (
	rowBlock   = 64   // rows
	timeBlock  = 128  // times
	bytesBlock = 4096 // bytes of JSON values
	ownBytes   = 512  // JSON values larger than this get their own allocation
)

// jobDecoder decodes the rows of one result selected with jobColumns.
type jobDecoder struct {
	fields []pgconn.FieldDescription
	rows   []leasetype.JobRow // unused part of the current block
	times  []time.Time        // used part of the current block
	bytes  []byte             // used part of the current block
	texts  map[string]string  // repeated texts, one string each
	left   int                // rows the result may still hold, or 0 when unknown
}

// decode reads one row's raw values into a new JobRow.
func (d *jobDecoder) decode(vals [][]byte) (*leasetype.JobRow, error) {
	if len(d.rows) == 0 {
		n := rowBlock
		if d.left > 0 {
			n = min(n, d.left)
		}
		d.rows = make([]leasetype.JobRow, n)
	}
	j := &d.rows[0]
	d.rows = d.rows[1:]
	if d.left > 0 {
		d.left--
	}
	r := wireReader{vals: vals}
	j.ID = r.int8()
	j.Kind = d.text(r.raw())
	j.Queue = d.text(r.raw())
	j.State = leasetype.JobState(d.text(r.raw()))
	j.Priority = int(r.int2())
	j.EncodedArgs = d.json(&r)
	j.Metadata = d.json(&r)
	j.UniqueKey = r.string()
	j.Attempt = int(r.int4())
	j.MaxAttempts = int(r.int4())
	j.Errors = int(r.int4())
	j.Expiries = int(r.int4())
	j.LastError = r.string()
	j.LeaseToken = r.int8()
	j.LeaseOwner = d.text(r.raw())
	j.LeasedAt = d.timePtr(&r)
	j.LeaseUntil = d.timePtr(&r)
	j.HeartbeatAt = d.timePtr(&r)
	j.Heartbeats = int(r.int4())
	j.LeaseTTL = time.Duration(r.int8()) * time.Millisecond
	j.ExpiryPolicy = leasetype.ExpiryPolicy(d.text(r.raw()))
	j.ScheduledAt = r.time()
	j.CreatedAt = r.time()
	j.FinalizedAt = d.timePtr(&r)
	j.CancelRequestedAt = d.timePtr(&r)
	j.Key = r.string()
	j.Sequence = r.string()
	j.Stage = r.string()
	if b := r.raw(); len(b) > 0 {
		j.StageState = append([]byte(nil), b...)
	}
	if r.err != nil {
		return nil, r.err
	}
	return j, nil
}

// text returns b as a string, the same string for the same text within
// the result.
func (d *jobDecoder) text(b []byte) string {
	if s, ok := d.texts[string(b)]; ok {
		return s
	}
	if d.texts == nil {
		d.texts = make(map[string]string, 8)
	}
	s := string(b)
	if len(d.texts) < 64 {
		d.texts[s] = s
	}
	return s
}

// json copies a jsonb value: in the binary format a version byte, then the
// text.
func (d *jobDecoder) json(r *wireReader) []byte {
	binaryFormat := r.i < len(d.fields) && d.fields[r.i].Format == pgx.BinaryFormatCode
	b := r.raw()
	if r.err != nil {
		return nil
	}
	if b == nil {
		r.fail("unexpected NULL json")
		return nil
	}
	if binaryFormat {
		if len(b) == 0 || b[0] != 1 {
			r.fail("unknown jsonb format")
			return nil
		}
		b = b[1:]
	}
	if len(b) > ownBytes {
		return append([]byte(nil), b...)
	}
	if cap(d.bytes)-len(d.bytes) < len(b) {
		d.bytes = make([]byte, 0, bytesBlock)
	}
	i := len(d.bytes)
	d.bytes = append(d.bytes, b...)
	return d.bytes[i:len(d.bytes):len(d.bytes)]
}

// timePtr reads a nullable timestamptz into a time of the current block.
func (d *jobDecoder) timePtr(r *wireReader) *time.Time {
	if r.null() {
		return nil
	}
	t := r.time()
	if len(d.times) == cap(d.times) {
		d.times = make([]time.Time, 0, timeBlock)
	}
	d.times = append(d.times, t)
	return &d.times[len(d.times)-1]
}

// wireReader reads a row's binary values in order; the first error sticks.
type wireReader struct {
	vals [][]byte
	i    int
	err  error
}

func (r *wireReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("column %d: %s", r.i-1, what)
	}
}

// raw returns the next value, nil for NULL.
func (r *wireReader) raw() []byte {
	if r.i >= len(r.vals) {
		r.i++
		r.fail("missing")
		return nil
	}
	v := r.vals[r.i]
	r.i++
	return v
}

// null reports whether the next value is NULL, consuming it if so.
func (r *wireReader) null() bool {
	if r.i < len(r.vals) && r.vals[r.i] == nil {
		r.i++
		return true
	}
	return false
}

func (r *wireReader) fixed(n int) []byte {
	b := r.raw()
	if len(b) != n {
		if b == nil {
			r.fail("unexpected NULL")
		} else {
			r.fail(fmt.Sprintf("%d bytes, want %d", len(b), n))
		}
		return make([]byte, n)
	}
	return b
}

func (r *wireReader) int2() int16 { return int16(binary.BigEndian.Uint16(r.fixed(2))) }
func (r *wireReader) int4() int32 { return int32(binary.BigEndian.Uint32(r.fixed(4))) }
func (r *wireReader) int8() int64 { return int64(binary.BigEndian.Uint64(r.fixed(8))) }

// string reads a text value that is usually empty.
func (r *wireReader) string() string {
	b := r.raw()
	if b == nil {
		r.fail("unexpected NULL text")
	}
	return string(b)
}

// pgEpochMicros is 2000-01-01 UTC, the zero of a binary timestamptz, in
// microseconds since the Unix epoch.
const pgEpochMicros = 946_684_800_000_000

var errInfiniteTime = errors.New("infinite timestamp")

// time reads a timestamptz: microseconds since 2000-01-01 UTC.
func (r *wireReader) time() time.Time {
	us := r.int8()
	if us == math.MaxInt64 || us == math.MinInt64 {
		if r.err == nil {
			r.err = fmt.Errorf("column %d: %w", r.i-1, errInfiniteTime)
		}
		return time.Time{}
	}
	return time.UnixMicro(us + pgEpochMicros).UTC()
}
