package transport

import "time"

// Backoff is the reconnect schedule of a peer that refuses connections (seed, "The transport":
// jittered exponential, because every broker notices the same peer restart at once).
type Backoff struct {
	Min time.Duration // delay after the first failure [100 ms]
	Max time.Duration // ceiling [10 s]
}

// Delay is the wait after the failures-th consecutive failed dial (failures ≥ 1), with
// jitter in [0, 1): "equal jitter", a uniform value in [d/2, d) where d = min(Max,
// Min·2^(failures-1)). Pure.
func (b Backoff) Delay(failures int, jitter float64) time.Duration {
	if b.Min <= 0 {
		b.Min = 100 * time.Millisecond
	}
	if b.Max < b.Min {
		b.Max = 10 * time.Second
		if b.Max < b.Min {
			b.Max = b.Min
		}
	}
	d := b.Min
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	if d > b.Max {
		d = b.Max
	}
	if jitter < 0 {
		jitter = 0
	}
	if jitter >= 1 {
		jitter = 0.999999
	}
	return d/2 + time.Duration(jitter*float64(d/2))
}
