package leasehold

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/leasetype"
)

// argsPlain decodes with encoding/json's defaults: its trivial args skip
// the decoder.
type argsPlain struct {
	N int    `json:"n"`
	S string `json:"s"`
}

func (argsPlain) Kind() string { return "args_plain" }

// argsHook decodes itself: every input reaches UnmarshalJSON.
type argsHook struct{ Raw string }

func (argsHook) Kind() string { return "args_hook" }

func (a *argsHook) UnmarshalJSON(b []byte) error {
	if string(b) == "{}" {
		return errors.New("argsHook refuses {}")
	}
	a.Raw = "hook:" + string(b)
	return nil
}

// argsEmbedsHook gets UnmarshalJSON from its embedded field.
type argsEmbedsHook struct{ argsHook }

func (argsEmbedsHook) Kind() string { return "args_embeds_hook" }

// argsText decodes from a JSON string only: an object is an error.
type argsText struct{ V string }

func (argsText) Kind() string { return "args_text" }

func (a *argsText) UnmarshalText(b []byte) error { a.V = string(b); return nil }

// argsMap is not a struct: {} decodes into an empty map, not a nil one.
type argsMap map[string]any

func (argsMap) Kind() string { return "args_map" }

// argsPtr is a pointer kind: {} allocates the value.
type argsPtr = *argsPlain

func TestDecodesTriviallyToZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		got  bool
		want bool
	}{
		{"struct{}", decodesTriviallyToZero[noopArgs](), true},
		{"plain struct", decodesTriviallyToZero[argsPlain](), true},
		{"UnmarshalJSON", decodesTriviallyToZero[argsHook](), false},
		{"embedded UnmarshalJSON", decodesTriviallyToZero[argsEmbedsHook](), false},
		{"UnmarshalText", decodesTriviallyToZero[argsText](), false},
		{"map", decodesTriviallyToZero[argsMap](), false},
		{"pointer", decodesTriviallyToZero[argsPtr](), false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: decodesTriviallyToZero = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// TestWorkerArgsDecodeAsJSON: whatever the encoded args, a worker's handler
// gets what json.Unmarshal into a zero value gives, and a decode error
// whenever it fails, with its message; the decoder skipped for trivial
// args changes none of it.
func TestWorkerArgsDecodeAsJSON(t *testing.T) {
	t.Parallel()
	inputs := []string{`{}`, `null`, ` {} `, `{ }`, `{"n":1,"s":"x"}`, `{"unknown":1}`, `{"n":"x"}`, ``, `[]`, `"x"`, `1`, `{`, `{}x`, `nul`}
	checkArgsDecode[noopArgs](t, inputs)
	checkArgsDecode[argsPlain](t, inputs)
	checkArgsDecode[argsHook](t, inputs)
	checkArgsDecode[argsEmbedsHook](t, inputs)
	checkArgsDecode[argsText](t, inputs)
	checkArgsDecode[argsMap](t, inputs)
}

func checkArgsDecode[T JobArgs](t *testing.T, inputs []string) {
	t.Helper()
	var (
		got  T
		zero T
	)
	w := NewWorkers()
	AddWorker(w, WorkFunc[T](func(_ context.Context, job *Job[T]) error {
		got = job.Args
		return nil
	}))
	work := w.byKind[zero.Kind()].work
	for _, in := range inputs {
		name := fmt.Sprintf("%T %q", zero, in)
		got = zero
		err := work(context.Background(), &leasetype.JobRow{EncodedArgs: []byte(in)})
		var want T
		wantErr := json.Unmarshal([]byte(in), &want)
		switch {
		case wantErr == nil && err != nil:
			t.Errorf("%s: error %v, want none", name, err)
		case wantErr != nil:
			var dec *errDecode
			if !errors.As(err, &dec) || dec.err.Error() != wantErr.Error() {
				t.Errorf("%s: error %v, want a decode error of %v", name, err, wantErr)
			}
		case !reflect.DeepEqual(got, want):
			t.Errorf("%s: args %#v, want %#v", name, got, want)
		}
	}
}
