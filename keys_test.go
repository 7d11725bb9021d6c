package leasehold

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

func keyFromArgsCases() []struct {
	name, args string
	paths      []string
	want, err  string
} {
	return []struct {
		name, args string
		paths      []string
		want, err  string
	}{
		{"string", `{"customer_id":"c-1"}`, []string{"customer_id"}, "c-1", ""},
		{"number keeps its text", `{"customer_id":12345678901234567890}`, []string{"customer_id"}, "12345678901234567890", ""},
		{"bool", `{"vip":true}`, []string{"vip"}, "true", ""},
		{"nested", `{"customer":{"id":"c-2"}}`, []string{"customer.id"}, "c-2", ""},
		{"several paths", `{"m":"m1","c":7}`, []string{"m", "c"}, "m1|7", ""},
		{"missing", `{"other":1}`, []string{"customer_id"}, "", `no value at "customer_id"`},
		{"missing nested", `{"customer":{}}`, []string{"customer.id"}, "", `no value at "customer.id"`},
		{"through a scalar", `{"customer":"c-3"}`, []string{"customer.id"}, "", "no object"},
		{"null", `{"customer_id":null}`, []string{"customer_id"}, "", "is null"},
		{"object", `{"customer_id":{"a":1}}`, []string{"customer_id"}, "", "object or array"},
		{"array", `{"customer_id":[1]}`, []string{"customer_id"}, "", "object or array"},
		{"empty", `{"customer_id":""}`, []string{"customer_id"}, "", "empty"},
	}
}

func TestKeyFromArgs(t *testing.T) {
	for _, tc := range keyFromArgsCases() {
		t.Run(tc.name, func(t *testing.T) {
			paths, err := parseKeyPaths("KeyBy", tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			got, err := keyFromArgs("KeyBy", "charge", paths, []byte(tc.args))
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrInvalidArgs) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want ErrInvalidArgs saying %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("key %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParseKeyPathsRefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", ".id", "customer.", "a..b"} {
		if _, err := parseKeyPaths("KeyBy", []string{p}); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

func TestAddWorkerRefusesBadKeyOptions(t *testing.T) {
	w := WorkFunc[keyTestArgs](func(ctx context.Context, j *Job[keyTestArgs]) error { return nil })
	for _, o := range []WorkerOpts{{KeyBy: []string{"a..b"}}, {SequenceBy: []string{""}}, {KeyLimit: -1}, {SequencePolicy: "skip"}} {
		if err := AddWorkerSafely(NewWorkers(), w, &o); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("options %+v: error %v, want ErrInvalidConfig", o, err)
		}
	}
}

type keyTestArgs struct{}

func (keyTestArgs) Kind() string { return "key_test" }

// TestInWindow: a claim stands only when every lease it dated starts
// within the rate window its count was taken for.
func TestInWindow(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *leasetype.JobRow { ts := start.Add(d); return &leasetype.JobRow{LeasedAt: &ts} }
	for _, tc := range []struct {
		name string
		rows []*leasetype.JobRow
		want bool
	}{
		{"none", nil, true},
		{"inside", []*leasetype.JobRow{at(0), at(399 * time.Millisecond)}, true},
		{"after the end", []*leasetype.JobRow{at(10 * time.Millisecond), at(400 * time.Millisecond)}, false},
		{"before the start", []*leasetype.JobRow{at(-time.Millisecond)}, false},
	} {
		if got := inWindow(tc.rows, start, 400*time.Millisecond); got != tc.want {
			t.Errorf("%s: inWindow = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestOneKeyedStatement: a limited claim goes in one round trip
// (driver.LockedKeyedClaimer) only when it is one keyed statement under the
// queue's limit row: with key options alone, not with a GlobalLimit, a rate
// limit of either kind, or a kind with limits of its own, each of which
// needs work between the lock and the commit.
func TestOneKeyedStatement(t *testing.T) {
	rate := &RateLimit{Limit: 5, Period: time.Second}
	for _, tc := range []struct {
		name    string
		q       QueueConfig
		workers map[string]*workerEntry
		want    bool
	}{
		{"key limit", QueueConfig{KeyLimit: 1}, nil, true},
		{"fair", QueueConfig{Fair: true}, nil, true},
		{"sequenced", QueueConfig{Sequenced: true}, nil, true},
		{"no key options", QueueConfig{}, nil, false},
		{"key limit and global limit", QueueConfig{KeyLimit: 1, GlobalLimit: 10}, nil, false},
		{"key limit and rate", QueueConfig{KeyLimit: 1, RateLimit: rate}, nil, false},
		{"key rate", QueueConfig{KeyRateLimit: rate}, nil, false},
		{"kind key limit", QueueConfig{}, map[string]*workerEntry{"k": {kind: "k", opts: WorkerOpts{KeyLimit: 1}}}, false},
		{"kind global limit", QueueConfig{KeyLimit: 1}, map[string]*workerEntry{"k": {kind: "k", opts: WorkerOpts{GlobalLimit: 2}}}, false},
		{"kind without limits", QueueConfig{KeyLimit: 1}, map[string]*workerEntry{"k": {kind: "k"}}, true},
	} {
		if got := newFlowLimits(tc.q, tc.workers).oneKeyedStatement(); got != tc.want {
			t.Errorf("%s: oneKeyedStatement = %v, want %v", tc.name, got, tc.want)
		}
	}
}
