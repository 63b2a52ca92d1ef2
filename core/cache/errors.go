package cache

import (
	"errors"
	"fmt"
)

// Errors of the cache state machine. Every error a Shard returns is one of
// these sentinels or wraps one (test with errors.Is). None of them changes the
// shard's state or produces a record. Client codes: spec/client-protocol.md
// §8.7.
var (
	// ErrNegativeTTL refuses a Put whose TTL is below zero (client code
	// "malformed").
	ErrNegativeTTL = errors.New("cache: negative ttl")
	// ErrZeroTTL refuses a Put whose TTL is exactly 0 ms. Such a value would
	// be expired at the instant it is written, never readable; rather than
	// guess whether the caller meant "no expiry" (which the wire spells
	// ttl_ms = null), the shard refuses it (docs/cache.md, "TTL").
	ErrZeroTTL = errors.New("cache: zero ttl (use no ttl for no expiry)")
	// ErrTTLTooLarge refuses a TTL whose absolute expiry (now + ttl) would not
	// fit in a signed 64-bit count of Unix milliseconds.
	ErrTTLTooLarge = errors.New("cache: ttl too large")
	// ErrEmptyKey refuses an empty key.
	ErrEmptyKey = errors.New("cache: empty key")
	// ErrKeyTooLarge refuses a key longer than Config.MaxKeyBytes.
	ErrKeyTooLarge = errors.New("cache: key too large")
	// ErrValueTooLarge refuses a value longer than Config.MaxValueBytes, or
	// one that alone would not fit in Config.MaxBytes.
	ErrValueTooLarge = errors.New("cache: value too large")
	// ErrCounterOverflow refuses a CounterAdd whose sum would leave the
	// signed 64-bit range; counters never wrap (spec/client-protocol.md §8.2).
	ErrCounterOverflow = errors.New("cache: counter overflow")
	// ErrCapacity refuses a CounterAdd that would create a counter beyond
	// Config.MaxCounters. Counters are never evicted (an evicted sum would
	// silently restart at zero); values are evicted instead of refused.
	ErrCapacity = errors.New("cache: capacity reached")
	// ErrIndeterminate is for the broker and the SDK: the outcome of a
	// write (Put, CounterAdd) is unknown because its answer was lost
	// (timeout, dropped connection or forward). Such a write is reported,
	// never silently re-sent; see SafeToResend (seeds/internal-protocol.txt,
	// "Forwarded cache operation"; client code "indeterminate").
	ErrIndeterminate = errors.New("cache: outcome indeterminate")
	// ErrCorruptRecord means a cache-log or counter-log payload does not
	// decode (docs/cache.md layouts). Replay stops at it.
	ErrCorruptRecord = errors.New("cache: corrupt record")
	// ErrReplayOrder means a replayed record's offset is not above the
	// previous one of the same log, or FinishReplay was given a next offset
	// below what was replayed.
	ErrReplayOrder = errors.New("cache: replay out of order")
)

// corrupt wraps ErrCorruptRecord with what was wrong.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorruptRecord}, args...)...)
}
