package leasehold

import (
	"testing"
	"time"
)

func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	tests := func() []struct {
		name     string
		policy   ExponentialBackoff
		errors   int
		min, max time.Duration
	} {
		return []struct {
			name     string
			policy   ExponentialBackoff
			errors   int
			min, max time.Duration
		}{
			{"defaults, first error", ExponentialBackoff{}, 1, 750 * time.Millisecond, time.Second},
			{"defaults, third error", ExponentialBackoff{}, 3, 3 * time.Second, 4 * time.Second},
			{"capped", ExponentialBackoff{}, 40, 45 * time.Minute, time.Hour},
			{"no jitter", ExponentialBackoff{Base: 10 * time.Millisecond, Jitter: -1}, 4, 80 * time.Millisecond, 80 * time.Millisecond},
			{"full jitter", ExponentialBackoff{Base: time.Second, Jitter: 1}, 1, 0, time.Second},
			{"zero errors treated as one", ExponentialBackoff{Base: time.Second, Jitter: -1}, 0, time.Second, time.Second},
			{"custom max", ExponentialBackoff{Base: time.Second, Max: 5 * time.Second, Jitter: -1}, 10, 5 * time.Second, 5 * time.Second},
			{"huge error count does not overflow", ExponentialBackoff{Jitter: -1}, 5000, time.Hour, time.Hour},
		}
	}
	for _, tc := range tests() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for range 200 {
				d := tc.policy.NextRetry(tc.errors)
				if d < tc.min || d > tc.max {
					t.Fatalf("NextRetry(%d) = %s, want within [%s, %s]", tc.errors, d, tc.min, tc.max)
				}
			}
		})
	}
}
