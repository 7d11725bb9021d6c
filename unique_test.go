package leasehold

import (
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/leasetype"
)

func TestUniqueKeyDerivation(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 17, 0, 0, time.UTC)
	args := []byte(`{"payment_id":42}`)
	base := UniqueOpts{ByArgs: true}
	k := base.uniqueKey("charge", "default", "", args, at)
	if !strings.HasPrefix(k, "charge:u:") || len(k) != len("charge:u:")+32 {
		t.Fatalf("key %q: want charge:u: and 32 hex digits", k)
	}
	same := []struct {
		name string
		key  string
	}{
		{"same inputs", base.uniqueKey("charge", "default", "", args, at)},
		{"queue ignored without ByQueue", base.uniqueKey("charge", "other", "", args, at)},
		{"time ignored without ByPeriod", base.uniqueKey("charge", "default", "", args, at.Add(time.Hour))},
	}
	for _, tc := range same {
		if tc.key != k {
			t.Errorf("%s: key %q, want %q", tc.name, tc.key, k)
		}
	}
	hourly := UniqueOpts{ByPeriod: time.Hour}
	different := []struct {
		name string
		key  string
	}{
		{"other args", base.uniqueKey("charge", "default", "", []byte(`{"payment_id":43}`), at)},
		{"other kind", base.uniqueKey("refund", "default", "", args, at)},
		{"queue with ByQueue", UniqueOpts{ByArgs: true, ByQueue: true}.uniqueKey("charge", "other", "", args, at)},
		{"named key added", base.uniqueKey("charge", "default", "p-42", args, at)},
		{"period", hourly.uniqueKey("charge", "default", "", args, at)},
		// Length prefixes: moving bytes between parts changes the key.
		{"boundary shift", UniqueOpts{ByArgs: true}.uniqueKey("charge", "default", "ab", []byte("c"), at)},
	}
	seen := map[string]string{k: "base"}
	for _, tc := range different {
		if prev, dup := seen[tc.key]; dup {
			t.Errorf("%s: key %q equals the key of %s", tc.name, tc.key, prev)
		}
		seen[tc.key] = tc.name
	}
	byArgs := UniqueOpts{ByArgs: true}
	if a, b := byArgs.uniqueKey("charge", "default", "ab", []byte("c"), at), byArgs.uniqueKey("charge", "default", "a", []byte("bc"), at); a == b {
		t.Errorf("key and args parts are not separated: %q", a)
	}
	// Same period, same key; next period, another.
	if a, b := hourly.uniqueKey("charge", "q", "", nil, at), hourly.uniqueKey("charge", "q", "", nil, at.Add(40*time.Minute)); a != b {
		t.Errorf("10:17 and 10:57 in one hourly period got different keys")
	}
	if a, b := hourly.uniqueKey("charge", "q", "", nil, at), hourly.uniqueKey("charge", "q", "", nil, at.Add(50*time.Minute)); a == b {
		t.Errorf("10:17 and 11:07 got the same hourly key")
	}
}

func TestUniqueOptsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts UniqueOpts
		ok   bool
	}{
		{UniqueOpts{ByArgs: true}, true},
		{UniqueOpts{ByPeriod: time.Second}, true},
		{UniqueOpts{ByPeriod: time.Millisecond}, false},
		{UniqueOpts{ByPeriod: -time.Hour}, false},
		{UniqueOpts{ByState: []leasetype.JobState{leasetype.JobStateCompleted, leasetype.JobStateCancelled}}, true},
		{UniqueOpts{ByState: []leasetype.JobState{leasetype.JobStateRunning}}, false},
		{UniqueOpts{ByState: []leasetype.JobState{"bogus"}}, false},
	} {
		if err := tc.opts.validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: validate() = %v, want ok=%v", tc.opts, err, tc.ok)
		}
	}
	got := UniqueOpts{ByState: []leasetype.JobState{leasetype.JobStateDiscarded, leasetype.JobStateCompleted, leasetype.JobStateDiscarded}}.finishedStates()
	if len(got) != 2 || got[0] != leasetype.JobStateCompleted || got[1] != leasetype.JobStateDiscarded {
		t.Errorf("finishedStates = %v, want [completed discarded]", got)
	}
}

func TestEpochTruncate(t *testing.T) {
	week := 7 * 24 * time.Hour
	// 1970-01-01 was a Thursday: weekly periods start on Thursdays at 00:00 UTC.
	got := epochTruncate(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), week)
	if want := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Fatalf("weekly period of Mon 2026-11-30 starts %s, want Thu %s", got, want)
	}
	if got := epochTruncate(time.Date(1969, 12, 31, 23, 30, 0, 0, time.UTC), time.Hour); !got.Equal(time.Date(1969, 12, 31, 23, 0, 0, 0, time.UTC)) {
		t.Fatalf("before the epoch: %s", got)
	}
}
