package leasehold_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/leasetype"
	"github.com/leasehold/leasehold/migrate"
	"github.com/leasehold/leasehold/sqlite"
)

// fuzzRawArgs are job arguments given as raw bytes, the way a caller with
// its own encoding (or a hostile one) could hand them to Insert.
type fuzzRawArgs struct {
	kind string
	raw  []byte
}

func (a fuzzRawArgs) Kind() string                 { return a.kind }
func (a fuzzRawArgs) MarshalJSON() ([]byte, error) { return a.raw, nil }

// fuzzDecoded is what a worker decodes the fuzzed arguments into.
type fuzzDecoded struct {
	PaymentID string         `json:"payment_id"`
	Amount    int64          `json:"amount"`
	Tags      []string       `json:"tags"`
	Meta      map[string]any `json:"meta"`
}

func (fuzzDecoded) Kind() string { return "fuzz.args" }

func newFuzzSQLite(f *testing.F) (*sqlite.Driver, *leasehold.Client[*sql.Tx]) {
	f.Helper()
	d, db, err := sqlite.Open(filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	if _, err := migrate.New(d).Up(context.Background()); err != nil {
		f.Fatal(err)
	}
	c, err := leasehold.NewClient(d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	return d, c
}

// FuzzInsertNames inserts jobs with fuzzed kinds, queue names and unique
// keys on SQLite. Insert must either store exactly what it was given or
// refuse with ErrInvalidArgs; a valid kind and queue with a printable UTF-8
// key must be accepted.
func FuzzInsertNames(f *testing.F) {
	for _, s := range [][3]string{
		{"email", "default", ""},
		{"payments.charge", "payments:eu/1", "pay_42"},
		{"", "", ""},
		{"-kind", "queue", "key"},
		{"kind with space", "q", "k"},
		{"kind", "q\x00ueue", "k\x00ey"},
		{"kïnd", "q", "ключ"},
		{"k", "q", "\xff\xfe invalid utf-8"},
		{"k", "q", "tab\tkey"},
		{"k", "q", "'; DROP TABLE leasehold_job; --"},
		{string(make([]byte, 129)), "q", ""},
		{"a", "b", string(make([]byte, 600))},
	} {
		f.Add(s[0], s[1], s[2])
	}
	_, c := newFuzzSQLite(f)
	f.Fuzz(func(t *testing.T, kind, queue, key string) {
		ctx := context.Background()
		res, err := c.Insert(ctx, fuzzRawArgs{kind: kind, raw: []byte(`{}`)}, &leasehold.InsertOpts{Queue: queue, UniqueKey: key})
		validNames := leasehold.ValidateKind(kind) == nil && (queue == "" || leasehold.ValidateQueueName(queue) == nil)
		if err != nil {
			if !errors.Is(err, leasehold.ErrInvalidArgs) {
				t.Fatalf("Insert(kind %q, queue %q, key %q) = %v, want nil or ErrInvalidArgs", kind, queue, key, err)
			}
			if validNames && printable(key) && len(key) <= 512 {
				t.Fatalf("Insert refused a valid kind %q, queue %q and key %q: %v", kind, queue, key, err)
			}
			return
		}
		if !validNames {
			t.Fatalf("Insert accepted kind %q, queue %q, which the validators refuse", kind, queue)
		}
		got, err := c.JobGet(ctx, res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantQueue := queue
		if wantQueue == "" {
			wantQueue = leasehold.DefaultQueue
		}
		if got.Kind != kind || got.Queue != wantQueue || got.UniqueKey != key {
			t.Fatalf("stored kind %q, queue %q, key %q; inserted %q, %q, %q", got.Kind, got.Queue, got.UniqueKey, kind, wantQueue, key)
		}
		// Free the key for the next input.
		if !res.UniqueSkipped {
			if _, err := c.JobCancel(ctx, got.ID); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// FuzzJobArgsDecode inserts fuzzed bytes as a job's arguments and runs the
// job through a real client: Insert refuses what is not JSON with
// ErrInvalidArgs; a job whose arguments do not decode into the worker's
// type is discarded without running the handler, never retried and never
// a crash; one that decodes runs with exactly the decoded arguments.
func FuzzJobArgsDecode(f *testing.F) {
	for _, s := range []string{
		`{"payment_id":"p1","amount":1250,"tags":["a"],"meta":{"k":1}}`,
		`{}`, `null`, `[]`, `1`, `"str"`, `{"amount":"not a number"}`, `{"amount":1e400}`,
		`{"amount":9223372036854775808}`, `{"tags":{"x":1}}`, `{"payment_id":"\ud800"}`, `{`, ``,
		`{"meta":{"a":{"b":{"c":[[[[[[]]]]]]}}}}`, "{\"payment_id\":\"\x00\"}", `{"a":1,"a":2}`,
		`{"payment_id":"\u0000"}`, `{"payment_id":"\\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	d, c := newFuzzSQLite(f)
	var ran atomic.Pointer[fuzzDecoded]
	w := leaseholdtest.NewWorker(f, d, &leasehold.Config{Logger: slog.New(slog.DiscardHandler)},
		leasehold.WorkFunc[fuzzDecoded](func(_ context.Context, job *leasehold.Job[fuzzDecoded]) error {
			args := job.Args
			ran.Store(&args)
			return nil
		}), &leasehold.WorkerOpts{MaxAttempts: 3})
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, raw []byte) {
		ctx := context.Background()
		res, err := c.Insert(ctx, fuzzRawArgs{kind: fuzzDecoded{}.Kind(), raw: raw},
			&leasehold.InsertOpts{Queue: fmt.Sprintf("fuzz-%d", n.Add(1))})
		if err != nil {
			if !errors.Is(err, leasehold.ErrInvalidArgs) {
				t.Fatalf("Insert(args %q) = %v, want nil or ErrInvalidArgs", raw, err)
			}
			// Valid JSON is refused only when too large or holding a NUL
			// escape (\u0000) or a lone surrogate escape, which
			// PostgreSQL's jsonb cannot store.
			if json.Valid(raw) && len(raw) < 1<<20 && !strings.Contains(err.Error(), "NUL character") && !strings.Contains(err.Error(), "lone UTF-16 surrogate") {
				t.Fatalf("Insert refused valid JSON %q: %v", raw, err)
			}
			return
		}
		ran.Store(nil)
		r := w.WorkJob(ctx, t, res.Job)
		if r == nil {
			return // WorkJob failed the test
		}
		var want fuzzDecoded
		decodeErr := json.Unmarshal(r.Job.EncodedArgs, &want)
		got := ran.Load()
		switch {
		case decodeErr == nil && (r.Job.State != leasetype.JobStateCompleted || got == nil):
			t.Fatalf("args %q decode, but the job ended %s (handler ran: %v)", raw, r.Job.State, got != nil)
		case decodeErr == nil && !reflect.DeepEqual(*got, want):
			t.Fatalf("args %q: handler got %+v, want %+v", raw, *got, want)
		case decodeErr != nil && (r.Job.State != leasetype.JobStateDiscarded || got != nil):
			t.Fatalf("args %q do not decode (%v), but the job ended %s (handler ran: %v)", raw, decodeErr, r.Job.State, got != nil)
		}
	})
}
