package leasehold

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy computes how long to wait before the next attempt of a job
// whose handler has failed errors times (1 after the first failure).
type RetryPolicy interface {
	NextRetry(errors int) time.Duration
}

// ExponentialBackoff is the default retry policy: Base doubled per error,
// capped at Max, with the delay drawn uniformly from [d*(1-Jitter), d] so
// that jobs failing together do not retry in lockstep.
type ExponentialBackoff struct {
	// Base is the delay after the first error; default 1 s.
	Base time.Duration
	// Max caps the delay; default 1 h.
	Max time.Duration
	// Jitter is the fraction of the delay that is random, 0 to 1; default 0.25.
	// Set a negative value for none.
	Jitter float64
}

// NextRetry implements RetryPolicy.
func (b ExponentialBackoff) NextRetry(errors int) time.Duration {
	base, maxD, jitter := b.Base, b.Max, b.Jitter
	if base <= 0 {
		base = time.Second
	}
	if maxD <= 0 {
		maxD = time.Hour
	}
	switch {
	case jitter == 0:
		jitter = 0.25
	case jitter < 0:
		jitter = 0
	case jitter > 1:
		jitter = 1
	}
	if errors < 1 {
		errors = 1
	}
	d := float64(base) * math.Pow(2, float64(errors-1))
	if d > float64(maxD) || math.IsInf(d, 0) {
		d = float64(maxD)
	}
	d -= d * jitter * rand.Float64()
	return time.Duration(d)
}
