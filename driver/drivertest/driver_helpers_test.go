package drivertest

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

// TestRowDiffComparesEveryField changes each field of a JobRow in turn and
// checks that rowDiff reports that field and only it: a field added to
// JobRow that rowDiff cannot compare fails here, not silently in the suite.
func TestRowDiffComparesEveryField(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	base := leasetype.JobRow{
		EncodedArgs: []byte(`{"a":1}`),
		Metadata:    []byte(`{}`),
		ScheduledAt: at,
		CreatedAt:   at,
		LeasedAt:    &at,
	}
	if diffs := rowDiff(&base, &base); len(diffs) > 0 {
		t.Fatalf("rowDiff of a row with itself = %q, want none", diffs)
	}
	typ := reflect.TypeFor[leasetype.JobRow]()
	for i := range typ.NumField() {
		field := typ.Field(i)
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Interface().(type) {
		case time.Time:
			v.Set(reflect.ValueOf(at.Add(time.Microsecond)))
		case *time.Time:
			later := at.Add(time.Microsecond)
			if v.IsNil() {
				v.Set(reflect.ValueOf(&later))
			} else {
				v.Set(reflect.Zero(v.Type()))
			}
		case []byte:
			v.SetBytes([]byte(`{"a":2}`))
		default:
			switch v.Kind() {
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.String:
				v.SetString(v.String() + "x")
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				v.SetInt(v.Int() + 1)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				v.SetUint(v.Uint() + 1)
			default:
				t.Errorf("JobRow.%s has type %s, for which neither rowDiff nor this test has a comparison", field.Name, field.Type)
				continue
			}
		}
		diffs := rowDiff(&changed, &base)
		if len(diffs) != 1 || !strings.HasPrefix(diffs[0], field.Name+": got ") {
			t.Errorf("rowDiff with JobRow.%s changed = %q, want one difference in %s", field.Name, diffs, field.Name)
		}
	}
}

// TestRowDiffNormalises checks the equalities rowDiff allows: the same
// instant in another location or without a monotonic reading, and the same
// JSON value written differently.
func TestRowDiffNormalises(t *testing.T) {
	t.Parallel()
	now := time.Now()
	utc := now.UTC()
	got := leasetype.JobRow{
		EncodedArgs: []byte(`{"a": 1, "b": [true]}`),
		ScheduledAt: now,
		CreatedAt:   now,
		LeasedAt:    &now,
	}
	want := leasetype.JobRow{
		EncodedArgs: []byte(`{"b":[true],"a":1}`),
		ScheduledAt: utc,
		CreatedAt:   now.Round(0).In(time.FixedZone("X", 3600)),
		LeasedAt:    &utc,
	}
	if diffs := rowDiff(&got, &want); len(diffs) > 0 {
		t.Errorf("rowDiff = %q, want none", diffs)
	}
	want.LeasedAt = nil
	if diffs := rowDiff(&got, &want); len(diffs) != 1 || diffs[0] != "LeasedAt: got "+now.String()+", want nil" {
		t.Errorf("rowDiff with LeasedAt nil = %q, want the one LeasedAt difference", diffs)
	}
}
