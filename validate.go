package leasehold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

const (
	maxNameLen      = 128
	maxUniqueKeyLen = 512
	minLeaseTTL     = 100 * time.Millisecond
	// maxLeaseTTL bounds every lease: a crashed worker's job waits at most
	// this long to run again, and a longer lease is almost always a unit
	// mistake (a count of milliseconds taken as a duration).
	maxLeaseTTL = 24 * time.Hour
	// maxAttemptsLimit is the largest MaxAttempts every backend stores (a
	// 32-bit column).
	maxAttemptsLimit = math.MaxInt32
)

// DefaultQueue is the queue of jobs inserted without InsertOpts.Queue, and
// the queue a client with Workers but no Queues works.
const DefaultQueue = "default"

const defaultQueue = DefaultQueue

// ValidateQueueName reports whether name is a valid queue name: 1 to 128
// bytes of letters, digits and _ - . : /, starting with a letter or digit.
// The error wraps ErrInvalidArgs and says what is wrong.
func ValidateQueueName(name string) error { return validateName("queue", name) }

// ValidateKind reports whether kind is a valid job kind, by the same rule as
// queue names.
func ValidateKind(kind string) error { return validateName("kind", kind) }

// validateName checks a kind or queue name: 1 to 128 characters of letters,
// digits and _ - . : /, starting with a letter or digit.
func validateName(what, name string) error {
	if name == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgs, what)
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("%w: %s %.40q... is %d bytes long (max %d)", ErrInvalidArgs, what, name, len(name), maxNameLen)
	}
	for i, c := range name {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '_' || c == '-' || c == '.' || c == ':' || c == '/') {
			continue
		}
		return fmt.Errorf("%w: %s %q has invalid character %q at byte %d (allowed: ASCII letters, digits, and _ - . : / after the first)", ErrInvalidArgs, what, name, c, i)
	}
	return nil
}

// validateUniqueKey checks an idempotency key: valid UTF-8 without control
// characters, at most 512 bytes.
func validateUniqueKey(key string) error {
	if len(key) > maxUniqueKeyLen {
		return fmt.Errorf("%w: unique key is %d bytes long (max %d)", ErrInvalidArgs, len(key), maxUniqueKeyLen)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: unique key is not valid UTF-8", ErrInvalidArgs)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			return fmt.Errorf("%w: unique key has control character %q at %d", ErrInvalidArgs, key[i], i)
		}
	}
	return nil
}

// encodeJSON encodes v as JSON without escaping <, > and & (json.Marshal
// writes them as \u003c, \u003e and \u0026, so a job's stored arguments
// would differ from what it was given and count six bytes for each).
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// hasLoneSurrogate reports whether encoded JSON holds a \uD800-\uDFFF escape
// that is not half of a surrogate pair: valid JSON text, but not a
// character, and PostgreSQL's jsonb refuses it.
func hasLoneSurrogate(encoded []byte) bool {
	inString := false
	for i := 0; i < len(encoded); i++ {
		switch c := encoded[i]; {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(encoded):
			if encoded[i+1] != 'u' {
				i++ // an escaped character, maybe a quote or a backslash
				continue
			}
			r, ok := hexRune(encoded, i+2)
			if !ok {
				continue
			}
			i += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return true // a low half without a high half before it
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := rune(0), false
				if i+2 < len(encoded) && encoded[i+1] == '\\' && encoded[i+2] == 'u' {
					low, ok = hexRune(encoded, i+3)
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return true
				}
				i += 6
			}
		}
	}
	return false
}

// hexRune reads the four hex digits at b[at:].
func hexRune(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// hasNULEscape reports whether encoded JSON holds the escape \u0000 (a NUL
// character in a string), which PostgreSQL's jsonb cannot store. An escaped
// backslash followed by "u0000" is not one.
func hasNULEscape(encoded []byte) bool {
	for i := 0; ; {
		j := bytes.Index(encoded[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		at := i + j
		backslashes := 0
		for k := at; k >= 0 && encoded[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 1 {
			return true
		}
		i = at + 1
	}
}
