package leasehold

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// cents is a named integer without hooks: the decoder writes it as an
// int64.
type cents int64

// flatArgs has a field of every kind argsDecoder decodes, a skipped field,
// an unexported one and a Go-named one.
type flatArgs struct {
	I      int    `json:"i"`
	I8     int8   `json:"i8"`
	I16    int16  `json:"i16"`
	I32    int32  `json:"i32,omitempty"`
	I64    int64  `json:"i64"`
	U      uint   `json:"u"`
	U8     uint8  `json:"u8"`
	U16    uint16 `json:"u16"`
	U32    uint32 `json:"u32"`
	U64    uint64 `json:"u64"`
	S      string `json:"s"`
	B      bool   `json:"b"`
	C      cents  `json:"c"`
	Skip   string `json:"-"`
	GoName string
	hidden int
}

// decodeFlat decodes in with a flatArgs decoder: the value and whether the
// decoder took the input.
func decodeFlat(t testing.TB, in string) (flatArgs, bool) {
	t.Helper()
	d := newArgsDecoder(reflect.TypeFor[flatArgs]())
	if d == nil {
		t.Fatal("newArgsDecoder(flatArgs) = nil, want a decoder")
	}
	var got flatArgs
	return got, d.decode([]byte(in), unsafe.Pointer(&got))
}

// TestArgsDecoderTakesFlatObjects: the inputs of the usual shape are
// decoded by argsDecoder (not handed to encoding/json), as json.Unmarshal
// decodes them; the others are declined.
func TestArgsDecoderTakesFlatObjects(t *testing.T) {
	t.Parallel()
	taken := []string{
		`{}`, ` { } `, `{"i":1}`, `{"i": -42, "s": "pay-1", "b": true}`,
		// jsonb's own spelling, as Postgres returns it.
		`{"c": 1250, "s": "p_01HZX", "u64": 18446744073709551615}`,
		`{"i8":-128,"i16":32767,"i32":-2147483648,"i64":-9223372036854775808}`,
		`{"u":0,"u8":255,"u16":65535,"u32":4294967295}`,
		`{"s":"héllo ✓","b":false,"GoName":"x"}`,
		`{"i":1,"i":2}`, `{"i":3,"i":null}`, `{"s":null}`, "{\n\t\"i\" :\r 7 \n}", `{"i":-0}`,
	}
	for _, in := range taken {
		got, ok := decodeFlat(t, in)
		if !ok {
			t.Errorf("decode(%s) declined, want it taken", in)
			continue
		}
		var want flatArgs
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", in, err)
		}
		if got != want {
			t.Errorf("decode(%s) = %+v, want %+v", in, got, want)
		}
	}
	declined := []string{
		``, `null`, `[]`, `1`, `"x"`, `{`, `{}x`, `{"i":1}x`, `{"i":1,}`, `{"i" 1}`, `{,}`,
		`{"I":1}`, `{"unknown":1}`, `{"Skip":"x"}`, `{"hidden":1}`, `{"goname":"x"}`,
		`{"i":1.5}`, `{"i":1e3}`, `{"i":01}`, `{"i":-}`, `{"i":"1"}`, `{"i":true}`,
		`{"i8":128}`, `{"u":-1}`, `{"u64":18446744073709551616}`, `{"i64":9223372036854775808}`,
		`{"s":"a\"b"}`, `{"s":"\u00e9"}`, "{\"s\":\"\x01\"}", "{\"s\":\"\xff\"}", `{"s":1}`,
		`{"b":"true"}`, `{"b":tru}`, `{"b":nul}`, `{"s\u0000":1}`,
	}
	for _, in := range declined {
		if _, ok := decodeFlat(t, in); ok {
			t.Errorf("decode(%q) taken, want it declined", in)
		}
	}
}

type (
	argsFloat  struct{ F float64 }
	argsSlice  struct{ L []string }
	argsTime   struct{ At time.Time }
	argsQuoted struct {
		N int `json:"n,string"`
	}
	argsOddTag struct {
		N int `json:"n n"`
	}
	argsTwice struct {
		X int
		Y int `json:"X"`
	}
	argsEmbedded  struct{ flatArgs }
	argsHookField struct{ V hookString }
	hookString    string
)

func (h *hookString) UnmarshalText(b []byte) error { *h = hookString("hook:" + string(b)); return nil }

// TestArgsDecoderDeclinesTypes: argsDecoder takes only the structs it
// decodes exactly as encoding/json does.
func TestArgsDecoderDeclinesTypes(t *testing.T) {
	t.Parallel()
	for _, typ := range []reflect.Type{
		reflect.TypeFor[argsFloat](), reflect.TypeFor[argsSlice](), reflect.TypeFor[argsTime](),
		reflect.TypeFor[argsQuoted](), reflect.TypeFor[argsOddTag](), reflect.TypeFor[argsTwice](),
		reflect.TypeFor[argsEmbedded](), reflect.TypeFor[argsHookField](), reflect.TypeFor[argsHook](),
		reflect.TypeFor[argsText](), reflect.TypeFor[argsMap](), reflect.TypeFor[int](),
	} {
		if d := newArgsDecoder(typ); d != nil {
			t.Errorf("newArgsDecoder(%v) = %+v, want nil", typ, d)
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[flatArgs](), reflect.TypeFor[argsPlain](), reflect.TypeFor[noopArgs]()} {
		if newArgsDecoder(typ) == nil {
			t.Errorf("newArgsDecoder(%v) = nil, want a decoder", typ)
		}
	}
}

// FuzzArgsDecoder: whatever argsDecoder takes, json.Unmarshal decodes
// without error into the same value.
func FuzzArgsDecoder(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"i":1,"s":"x","b":true}`, `{"c": 1250, "s": "p_01", "u64": 18446744073709551615}`,
		`{"i8":-129}`, `{"u":-0}`, `{"i":1e2}`, `{"s":"\u0041"}`, "{\"s\":\"\xc3\xa9\"}", `{"i":null,"b":null}`,
		`{"GoName":"a","goName":"b"}`, `{"i":00}`, `{"i":-01}`, ` {"i":1} `, `{"b":false}`,
	} {
		f.Add([]byte(s))
	}
	d := newArgsDecoder(reflect.TypeFor[flatArgs]())
	f.Fuzz(func(t *testing.T, in []byte) {
		var got flatArgs
		if !d.decode(in, unsafe.Pointer(&got)) {
			return
		}
		var want flatArgs
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("decode(%q) took it, json.Unmarshal fails: %v", in, err)
		}
		if got != want {
			t.Fatalf("decode(%q) = %+v, json.Unmarshal gives %+v", in, got, want)
		}
	})
}

// BenchmarkArgsDecode decodes arguments of the usual shape with argsDecoder
// and with json.Unmarshal:
//
//	go test -run '^$' -bench ArgsDecode -benchmem .
func BenchmarkArgsDecode(b *testing.B) {
	in := []byte(`{"c": 1250, "s": "p_01HZX3K9", "i": 42, "b": true}`)
	b.Run("argsDecoder", func(b *testing.B) {
		d := newArgsDecoder(reflect.TypeFor[flatArgs]())
		for range b.N {
			var a flatArgs
			if !d.decode(in, unsafe.Pointer(&a)) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for range b.N {
			var a flatArgs
			if err := json.Unmarshal(in, &a); err != nil {
				b.Fatal(err)
			}
		}
	})
}
