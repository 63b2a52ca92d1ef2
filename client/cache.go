package client

import (
	"context"
	"fmt"
	"time"

	"felix/proto"
)

// Cache operations (spec/client-protocol.md §6, §8.1, §8.2). Every call needs the cache to
// exist (Admin.CreateCache) and the permission cache.read (Get, CounterGet) or cache.write
// (Put, Delete, CounterAdd). Keys are UTF-8 strings of 1..MaxCacheKeyBytes bytes; values
// are 0..MaxCacheValueBytes bytes. Every call checks its key (and Put its value) before
// sending: ErrInvalidArgument for an empty key, ErrTooLarge over a limit.
//
// Retry rules follow seeds/internal-protocol.txt, "Forwarded cache operation": Get,
// Delete and CounterGet land on the same state when applied twice, so the SDK re-sends them
// after an indeterminate outcome; Put (a re-sent TTL restarts its clock) and CounterAdd
// (it would count twice) are never re-sent: a lost answer is returned as ErrIndeterminate
// and the caller decides.

// Cache key and value limits of the broker (docs/cache.md, "Keys, values and shards":
// core/cache's MaxKeyBytes and MaxValueBytes defaults, which the broker does not change).
// The SDK refuses longer keys and values before sending with ErrTooLarge, a definite error
// (a request over the limit would otherwise be refused or cut off by the broker and could
// surface as ErrIndeterminate).
const (
	// MaxCacheKeyBytes is the longest cache key in bytes (keys are 1..1024 bytes).
	MaxCacheKeyBytes = 1024
	// MaxCacheValueBytes is the longest cache value in bytes (1 MiB; 0 bytes is a value).
	MaxCacheValueBytes = 1 << 20
)

// checkKey refuses an empty key (ErrInvalidArgument) or one over MaxCacheKeyBytes
// (ErrTooLarge) before anything is sent.
func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty cache key", ErrInvalidArgument)
	case len(key) > MaxCacheKeyBytes:
		return fmt.Errorf("%w: cache key of %d bytes (at most %d)", ErrTooLarge, len(key), MaxCacheKeyBytes)
	}
	return nil
}

// Put stores value under key in cache with a time to live (0 = no expiry; otherwise at
// least 1 ms, rounded down to milliseconds). Errors: ErrNotFound (no such cache),
// ErrUnauthorized, ErrOverloaded, ErrIndeterminate (answer lost: the value may or may not be
// stored; not re-sent), ErrInvalidArgument (negative ttl, empty key), ErrTooLarge (key over
// MaxCacheKeyBytes or value over MaxCacheValueBytes; not sent).
func (c *Client) Put(ctx context.Context, cache, key string, value []byte, ttl time.Duration) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if len(value) > MaxCacheValueBytes {
		return fmt.Errorf("%w: cache value of %d bytes (at most %d)", ErrTooLarge, len(value), MaxCacheValueBytes)
	}
	var ttlMs *uint64
	switch {
	case ttl < 0:
		return fmt.Errorf("%w: negative ttl %v", ErrInvalidArgument, ttl)
	case ttl > 0:
		ms := uint64(ttl / time.Millisecond)
		if ms == 0 {
			ms = 1
		}
		ttlMs = &ms
	}
	if value == nil {
		value = []byte{}
	}
	m, err := c.roundTrip(ctx, false, func(id uint64) proto.Message {
		return &proto.CachePut{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: cache, Key: key, Value: value, RequestID: &id, TTLMs: ttlMs}
	})
	if err != nil {
		return err
	}
	if _, ok := m.(*proto.CacheOK); !ok {
		return unexpected(m, "cache_ok")
	}
	return nil
}

// Get returns the value stored under key. found=false means the key is absent or expired;
// a stored empty value is found with a non-nil empty slice (spec §6: cache_value.value is
// null only for a miss). Re-sent after an indeterminate outcome. Errors: ErrNotFound (no
// such cache), ErrUnauthorized, ErrOverloaded, ErrIndeterminate (after WithMaxAttempts).
func (c *Client) Get(ctx context.Context, cache, key string) (value []byte, found bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	m, err := c.roundTrip(ctx, true, func(id uint64) proto.Message {
		return &proto.CacheGet{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: cache, Key: key, RequestID: &id}
	})
	if err != nil {
		return nil, false, err
	}
	v, ok := m.(*proto.CacheValue)
	if !ok {
		return nil, false, unexpected(m, "cache_value")
	}
	if v.Value == nil {
		return nil, false, nil
	}
	return v.Value, true, nil
}

// Delete removes key and returns the value it removed; found=false when the key did not
// exist (spec §8.1; needs the broker feature cache_delete, else ErrUnsupported). Re-sent
// after an indeterminate outcome: a second delete of the same key finds nothing, so after
// a retry found may be false although this call removed the value.
func (c *Client) Delete(ctx context.Context, cache, key string) (removed []byte, found bool, err error) {
	if err := checkKey(key); err != nil {
		return nil, false, err
	}
	if err := c.requireFeature(ctx, proto.FeatureCacheDelete); err != nil {
		return nil, false, err
	}
	m, err := c.roundTrip(ctx, true, func(id uint64) proto.Message {
		return &proto.CacheDelete{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: cache, Key: key, RequestID: &id}
	})
	if err != nil {
		return nil, false, err
	}
	v, ok := m.(*proto.CacheDeleted)
	if !ok {
		return nil, false, unexpected(m, "cache_deleted")
	}
	if v.Value == nil {
		return nil, false, nil
	}
	return v.Value, true, nil
}

// CounterAdd adds delta (two's-complement i64, wrapping) to the counter key and returns the
// sum after the add (spec §8.2; feature counters). Never re-sent: a lost answer is
// ErrIndeterminate (the add may have been applied).
func (c *Client) CounterAdd(ctx context.Context, cache, key string, delta int64) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	if err := c.requireFeature(ctx, proto.FeatureCounters); err != nil {
		return 0, err
	}
	m, err := c.roundTrip(ctx, false, func(id uint64) proto.Message {
		return &proto.CounterAdd{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: cache, Key: key, Delta: delta, RequestID: &id}
	})
	return counterValue(m, err)
}

// CounterGet returns the counter's sum and whether it exists (spec §8.2; feature counters):
// found=false (value 0) for a counter never added to, which is absent, not zero; a counter
// added back to 0 is found with value 0 (issue 25; the answer's found? field,
// docs/client-protocol.md). An older broker's answer has no found? and reads as found, so
// against one an unwritten counter reads (0, true). Re-sent after an indeterminate outcome.
// Errors: ErrNotFound (no such cache), ErrUnauthorized, ErrUnsupported (no counters
// feature), ErrOverloaded, ErrIndeterminate (after WithMaxAttempts), ErrInvalidArgument
// or ErrTooLarge (key; not sent).
func (c *Client) CounterGet(ctx context.Context, cache, key string) (value int64, found bool, err error) {
	if err := checkKey(key); err != nil {
		return 0, false, err
	}
	if err := c.requireFeature(ctx, proto.FeatureCounters); err != nil {
		return 0, false, err
	}
	m, err := c.roundTrip(ctx, true, func(id uint64) proto.Message {
		return &proto.CounterGet{TenantID: c.cfg.tenant, Namespace: c.cfg.namespace, Cache: cache, Key: key, RequestID: &id}
	})
	if err != nil {
		return 0, false, err
	}
	v, ok := m.(*proto.CounterValue)
	if !ok {
		return 0, false, unexpected(m, "counter_value")
	}
	if !v.IsFound() {
		return 0, false, nil
	}
	return v.Value, true, nil
}

func counterValue(m proto.Message, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	v, ok := m.(*proto.CounterValue)
	if !ok {
		return 0, unexpected(m, "counter_value")
	}
	return v.Value, nil
}

// unexpected reports an answer of the wrong type for a request id.
func unexpected(m proto.Message, want string) error {
	return fmt.Errorf("%w: got %s, want %s", ErrProtocol, m.Type(), want)
}
