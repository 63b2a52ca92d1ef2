package client

import (
	"math/rand/v2"
	"time"
)

// backoff is the jittered exponential reconnect schedule: after n consecutive failures the
// next attempt waits a random duration in [d/2, d], d = min(max, min·2^(n-1)). Jitter keeps
// every client of a restarted broker from redialling at the same instant. Not
// goroutine-safe; the owner (a connection slot) holds its lock.
type backoff struct {
	min, max time.Duration
	failures int
	rnd      func(n int64) int64 // uniform in [0, n); rand.Int64N in production
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, rnd: rand.Int64N}
}

// next records one more failure and returns the wait before the next attempt.
func (b *backoff) next() time.Duration {
	b.failures++
	d := b.min
	for i := 1; i < b.failures && d < b.max; i++ {
		d *= 2
	}
	if d > b.max {
		d = b.max
	}
	half := d / 2
	return half + time.Duration(b.rnd(int64(d-half)+1))
}

// reset forgets the failures after a success.
func (b *backoff) reset() { b.failures = 0 }
