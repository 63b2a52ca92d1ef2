package cache

import "math"

// TTL is a value's time to live as given by a client: either none (the zero
// TTL, the wire's ttl_ms = null, spec/client-protocol.md §6) or a count of
// milliseconds. Build one with TTLMillis; validity is checked by Shard.Put.
type TTL struct {
	millis int64
	set    bool
}

// NoTTL is the TTL of a value that never expires (ttl_ms = null).
var NoTTL = TTL{}

// TTLMillis returns a TTL of ms milliseconds. Shard.Put refuses ms < 0 with
// ErrNegativeTTL and ms == 0 with ErrZeroTTL (docs/cache.md, "TTL").
func TTLMillis(ms int64) TTL { return TTL{millis: ms, set: true} }

// IsSet reports whether the TTL bounds the value's life.
func (t TTL) IsSet() bool { return t.set }

// Millis returns the TTL in milliseconds; 0 when it is not set.
func (t TTL) Millis() int64 { return t.millis }

// expiry returns the absolute expiry instant (Unix ms) of a value written at
// nowMillis, and whether it has one. The value is readable while
// now < expiresAt and expired from the instant now == expiresAt.
func (t TTL) expiry(nowMillis int64) (expiresAt int64, has bool, err error) {
	if !t.set {
		return 0, false, nil
	}
	switch {
	case t.millis < 0:
		return 0, false, ErrNegativeTTL
	case t.millis == 0:
		return 0, false, ErrZeroTTL
	case nowMillis > 0 && t.millis > math.MaxInt64-nowMillis:
		return 0, false, ErrTTLTooLarge
	}
	return nowMillis + t.millis, true, nil
}
