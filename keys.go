package leasehold

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/leasehold/leasehold/driver"
)

// SequencePolicy says what a sequence does when one of its jobs ends
// discarded or cancelled: whether the jobs after it wait for an operator or
// go on.
type SequencePolicy string

// Sequence policies.
const (
	// SequenceBlock, the default, holds the jobs after a discarded or
	// cancelled job until an operator retries it (it runs again, then the
	// sequence goes on) or deletes it. Client.SequencesBlocked lists such
	// sequences.
	SequenceBlock SequencePolicy = "block"
	// SequenceContinue lets the jobs after a discarded or cancelled job
	// run. A stuck job blocks its sequence under either policy: whether its
	// work happened is unknown until it is reconciled.
	SequenceContinue SequencePolicy = "continue"
)

// keyPath is a parsed JSON path into a job's args: object member names from
// the top ("customer.id" is args["customer"]["id"]).
type keyPath []string

// parseKeyPaths checks and parses the paths of KeyBy or SequenceBy.
func parseKeyPaths(what string, paths []string) ([]keyPath, error) {
	out := make([]keyPath, 0, len(paths))
	for _, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("%s: path is empty", what)
		}
		parts := strings.Split(p, ".")
		for _, part := range parts {
			if part == "" {
				return nil, fmt.Errorf("%s: path %q has an empty member name (want names joined by dots, as customer.id)", what, p)
			}
		}
		out = append(out, parts)
	}
	return out, nil
}

// keyFromArgs derives a key from the encoded args: the value at each path,
// strings as they are and numbers and booleans as their JSON text, joined
// by "|" when there are several paths. A missing, null or non-scalar value
// is an error: a key must name one thing.
func keyFromArgs(what, kind string, paths []keyPath, encoded []byte) (string, error) {
	var args any
	dec := json.NewDecoder(bytes.NewReader(encoded))
	dec.UseNumber()
	if err := dec.Decode(&args); err != nil {
		return "", fmt.Errorf("%w: %s of kind %q: decode args: %w", ErrInvalidArgs, what, kind, err)
	}
	parts := make([]string, 0, len(paths))
	for _, path := range paths {
		v := args
		for _, name := range path {
			obj, ok := v.(map[string]any)
			if !ok {
				return "", fmt.Errorf("%w: %s of kind %q: args have no object at %q to read %q from",
					ErrInvalidArgs, what, kind, strings.Join(path, "."), name)
			}
			if v, ok = obj[name]; !ok {
				return "", fmt.Errorf("%w: %s of kind %q: args have no value at %q", ErrInvalidArgs, what, kind, strings.Join(path, "."))
			}
		}
		switch x := v.(type) {
		case string:
			parts = append(parts, x)
		case json.Number:
			parts = append(parts, x.String())
		case bool:
			parts = append(parts, fmt.Sprint(x))
		case nil:
			return "", fmt.Errorf("%w: %s of kind %q: the value at %q is null", ErrInvalidArgs, what, kind, strings.Join(path, "."))
		default:
			return "", fmt.Errorf("%w: %s of kind %q: the value at %q is an object or array, not a string, number or boolean",
				ErrInvalidArgs, what, kind, strings.Join(path, "."))
		}
	}
	key := strings.Join(parts, "|")
	if key == "" {
		return "", fmt.Errorf("%w: %s of kind %q: the key derived from the args is empty", ErrInvalidArgs, what, kind)
	}
	return key, nil
}

// validateFlowKey checks a flow-control or sequence key: at most
// driver.MaxKeyLen bytes of valid UTF-8 without control characters.
func validateFlowKey(what, key string) error {
	if len(key) > driver.MaxKeyLen {
		return fmt.Errorf("%w: %s is %d bytes long (max %d)", ErrInvalidArgs, what, len(key), driver.MaxKeyLen)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgs, what)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] == 0x7f {
			return fmt.Errorf("%w: %s has control character %q at %d", ErrInvalidArgs, what, key[i], i)
		}
	}
	return nil
}

// jobKeys sets the key and the sequence of an insert: the options' own, or
// derived from the args by the kind's worker registered on this client.
func (c *clientCore) jobKeys(p *driver.JobInsertParams, o *InsertOpts) error {
	p.Key, p.Sequence = o.Key, o.Sequence
	if e := c.workers[p.Kind]; e != nil {
		var err error
		if p.Key == "" && len(e.keyBy) > 0 {
			if p.Key, err = keyFromArgs("KeyBy", p.Kind, e.keyBy, p.EncodedArgs); err != nil {
				return err
			}
		}
		if p.Sequence == "" && len(e.sequenceBy) > 0 {
			if p.Sequence, err = keyFromArgs("SequenceBy", p.Kind, e.sequenceBy, p.EncodedArgs); err != nil {
				return err
			}
		}
	}
	if err := validateFlowKey("key", p.Key); err != nil {
		return err
	}
	return validateFlowKey("sequence", p.Sequence)
}
