package leasehold

import (
	"bytes"
	"fmt"
	"time"
	"unicode/utf8"
)

const (
	maxNameLen      = 128
	maxUniqueKeyLen = 512
	minLeaseTTL     = 100 * time.Millisecond
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
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || i > 0 && (c == '_' || c == '-' || c == '.' || c == ':' || c == '/') {
			continue
		}
		return fmt.Errorf("%w: %s %q has invalid character %q at %d (allowed: letters, digits, and _ - . : / after the first)", ErrInvalidArgs, what, name, c, i)
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
