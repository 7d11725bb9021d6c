package leasehold

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// argsDecoder decodes a job's encoded arguments into a struct without
// encoding/json, for the shape most job arguments have: one flat object of
// strings, integers and booleans, its keys spelled as the fields' JSON
// names. json.Unmarshal spent about 1.5 µs of the client's CPU per job on
// such arguments, a sixth of it in a drain (`{"num":N}`); this takes a
// small fraction of that (BenchmarkArgsDecode).
//
// It accepts a strict subset of what json.Unmarshal accepts and declines
// everything else: a key that is not exactly a field's name (encoding/json
// would match it case-insensitively or skip it), an escape in a string,
// invalid UTF-8 (replaced by encoding/json), a number with a fraction or
// an exponent or out of the field's range (an error there), a value of
// another JSON type than the field's. Whatever it accepts decodes exactly
// as json.Unmarshal decodes it into a zero value (FuzzArgsDecoder);
// whatever it declines goes to json.Unmarshal, on a zero value again.
type argsDecoder struct {
	fields []argsField
}

// argsField is one field of the struct: its JSON name, where it lies in
// the struct, and its kind.
type argsField struct {
	name   string
	offset uintptr
	kind   reflect.Kind
}

// newArgsDecoder returns the decoder of t, or nil when t is not a struct
// whose every field it can decode as encoding/json would: no field
// embedded, none with the ",string" option or a tag name other than
// letters, digits, '_' and '-', none of a kind other than bool, the signed
// and unsigned integers and string, no two with one name, and no decoding
// hook (UnmarshalJSON, UnmarshalText) on the struct or on a field's type.
// Unexported fields and fields tagged "-" are left alone, as encoding/json
// leaves them.
func newArgsDecoder(t reflect.Type) *argsDecoder {
	if t.Kind() != reflect.Struct || hasDecodeHook(t) {
		return nil
	}
	d := &argsDecoder{}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil // encoding/json promotes an embedded struct's fields
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		for o := range strings.SplitSeq(opts, ",") {
			if o == "string" {
				return nil
			}
		}
		if name == "" {
			name = f.Name
		} else if !plainTagName(name) {
			return nil
		}
		switch f.Type.Kind() {
		case reflect.Bool, reflect.String,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		default:
			return nil
		}
		if hasDecodeHook(f.Type) {
			return nil
		}
		for _, other := range d.fields {
			if other.name == name {
				return nil
			}
		}
		d.fields = append(d.fields, argsField{name: name, offset: f.Offset, kind: f.Type.Kind()})
	}
	return d
}

// hasDecodeHook reports whether t or *t decodes itself from JSON.
func hasDecodeHook(t reflect.Type) bool {
	for _, hook := range []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()} {
		if t.Implements(hook) || reflect.PointerTo(t).Implements(hook) {
			return true
		}
	}
	return false
}

// plainTagName reports whether a tag name is letters, digits, '_' and '-'
// only: encoding/json takes such a name as it is (it ignores some other
// spellings).
func plainTagName(name string) bool {
	for _, c := range name {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// decode decodes data into the struct at p, which is of the decoder's
// type and zero, and reports whether it did. When it returns false it may
// have written some fields: the caller zeroes the value before decoding
// data some other way.
func (d *argsDecoder) decode(data []byte, p unsafe.Pointer) bool {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		key, next, ok := plainString(data, i)
		if !ok {
			return false
		}
		f := d.field(key)
		if f == nil {
			return false
		}
		i = skipSpace(data, next)
		if i == len(data) || data[i] != ':' {
			return false
		}
		if i, ok = f.set(data, skipSpace(data, i+1), p); !ok {
			return false
		}
		i = skipSpace(data, i)
		if i == len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// field returns the field named key exactly, or nil.
func (d *argsDecoder) field(key []byte) *argsField {
	for i := range d.fields {
		if d.fields[i].name == string(key) {
			return &d.fields[i]
		}
	}
	return nil
}

// set decodes the value at data[i:] into f of the struct at p and returns
// the index after it. null leaves the field as it is, as encoding/json
// does for these kinds.
func (f *argsField) set(data []byte, i int, p unsafe.Pointer) (int, bool) {
	if hasLiteral(data, i, "null") {
		return i + 4, true
	}
	at := unsafe.Add(p, f.offset)
	switch f.kind {
	case reflect.Bool:
		switch {
		case hasLiteral(data, i, "true"):
			*(*bool)(at) = true
			return i + 4, true
		case hasLiteral(data, i, "false"):
			*(*bool)(at) = false
			return i + 5, true
		}
		return i, false
	case reflect.String:
		s, next, ok := plainString(data, i)
		if ok {
			*(*string)(at) = string(s)
		}
		return next, ok
	}
	lit, next, ok := integerLiteral(data, i)
	if !ok {
		return i, false
	}
	switch f.kind {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(string(lit), 10, intBits(f.kind))
		if err != nil {
			return i, false
		}
		switch f.kind {
		case reflect.Int:
			*(*int)(at) = int(n)
		case reflect.Int8:
			*(*int8)(at) = int8(n)
		case reflect.Int16:
			*(*int16)(at) = int16(n)
		case reflect.Int32:
			*(*int32)(at) = int32(n)
		default:
			*(*int64)(at) = n
		}
	default:
		if lit[0] == '-' {
			return i, false
		}
		n, err := strconv.ParseUint(string(lit), 10, intBits(f.kind))
		if err != nil {
			return i, false
		}
		switch f.kind {
		case reflect.Uint:
			*(*uint)(at) = uint(n)
		case reflect.Uint8:
			*(*uint8)(at) = uint8(n)
		case reflect.Uint16:
			*(*uint16)(at) = uint16(n)
		case reflect.Uint32:
			*(*uint32)(at) = uint32(n)
		default:
			*(*uint64)(at) = n
		}
	}
	return next, true
}

// intBits is the size in bits of an integer kind.
func intBits(k reflect.Kind) int {
	switch k {
	case reflect.Int8, reflect.Uint8:
		return 8
	case reflect.Int16, reflect.Uint16:
		return 16
	case reflect.Int32, reflect.Uint32:
		return 32
	case reflect.Int64, reflect.Uint64:
		return 64
	}
	return strconv.IntSize
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// hasLiteral reports whether data[i:] starts with lit.
func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// plainString reads the JSON string at data[i:] when it has no escape and
// no control character and is valid UTF-8: its content, and the index
// after its closing quote.
func plainString(data []byte, i int) ([]byte, int, bool) {
	if i == len(data) || data[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s := data[i+1 : j]
			return s, j + 1, utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, i, false
		}
	}
	return nil, i, false
}

// integerLiteral reads the JSON number at data[i:] when it is an integer:
// an optional minus sign and digits without a leading zero, followed by
// neither a fraction nor an exponent.
func integerLiteral(data []byte, i int) ([]byte, int, bool) {
	j := i
	if j < len(data) && data[j] == '-' {
		j++
	}
	start := j
	for j < len(data) && data[j] >= '0' && data[j] <= '9' {
		j++
	}
	switch {
	case j == start, data[start] == '0' && j-start > 1:
		return nil, i, false
	case j < len(data) && (data[j] == '.' || data[j] == 'e' || data[j] == 'E'):
		return nil, i, false
	}
	return data[i:j], j, true
}
