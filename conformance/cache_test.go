package conformance

// Cache and counter scenarios (catalogue ids cache.*, counter.*).

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func init() {
	register("cache.byte-exact", cacheByteExact)
	register("cache.miss-absent", cacheMissAbsent)
	register("cache.delete-returns-removed", cacheDeleteReturnsRemoved)
	register("cache.ttl-expires", cacheTTLExpires)
	register("counter.add-returns-sum", counterAddReturnsSum)
	register("counter.absent-not-zero", counterAbsentNotZero)
}

func cacheByteExact(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("bytes")
	c, ctx := b.dial(), stepCtx(t)
	for i, v := range oddPayloads() {
		key := fmt.Sprintf("k%d", i)
		if err := c.Put(ctx, "bytes", key, v, 0); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		got, found, err := c.Get(ctx, "bytes", key)
		if err != nil || !found || !bytes.Equal(got, v) || got == nil {
			t.Fatalf("get %s: %d bytes %q found=%v err=%v, want %d bytes", key, len(got), trunc(got), found, err, len(v))
		}
	}
}

func cacheMissAbsent(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("miss")
	c, ctx := b.dial(), stepCtx(t)
	v, found, err := c.Get(ctx, "miss", "never-written")
	if err != nil || found || v != nil {
		t.Fatalf("miss: %q found=%v err=%v, want absent without an error", v, found, err)
	}
}

func cacheDeleteReturnsRemoved(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("del")
	c, ctx := b.dial(), stepCtx(t)
	if err := c.Put(ctx, "del", "k", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	removed, found, err := c.Delete(ctx, "del", "k")
	if err != nil || !found || string(removed) != "v1" {
		t.Fatalf("delete: %q found=%v err=%v, want the removed v1", removed, found, err)
	}
	for _, key := range []string{"k", "never-written"} {
		if removed, found, err := c.Delete(ctx, "del", key); err != nil || found || removed != nil {
			t.Fatalf("delete of absent %s: %q found=%v err=%v, want absent without an error", key, removed, found, err)
		}
	}
	if _, found, err := c.Get(ctx, "del", "k"); err != nil || found {
		t.Fatalf("get after delete: found=%v err=%v", found, err)
	}
}

func cacheTTLExpires(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("ttl")
	c, ctx := b.dial(), stepCtx(t)
	if err := c.Put(ctx, "ttl", "stays", []byte("s"), 0); err != nil {
		t.Fatal(err)
	}
	put := time.Now() // before the broker applied the put, so its TTL clock starts after this
	if err := c.Put(ctx, "ttl", "short", []byte("x"), 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.Get(ctx, "ttl", "short"); err != nil || (!found && time.Since(put) < 250*time.Millisecond) {
		t.Fatalf("before its TTL: found=%v err=%v", found, err)
	}
	// Expiry runs on the broker's clock: poll until absent, bounded.
	waitFor(t, 10*time.Second, "a 300 ms TTL passed", func() bool {
		_, found, err := c.Get(ctx, "ttl", "short")
		if err != nil {
			t.Fatalf("get after TTL: %v (an expired value is absent, not an error)", err)
		}
		return !found
	})
	if elapsed := time.Since(put); elapsed < 300*time.Millisecond {
		t.Fatalf("expired after %v, before its 300 ms TTL", elapsed)
	}
	if v, found, err := c.Get(ctx, "ttl", "stays"); err != nil || !found || string(v) != "s" {
		t.Fatalf("value without TTL: %q %v %v", v, found, err)
	}
}

func counterAddReturnsSum(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("sums")
	c, ctx := b.dial(), stepCtx(t)
	want := int64(0)
	for _, d := range []int64{5, -7, 1 << 40, -(1 << 40), 2} {
		want += d
		sum, err := c.CounterAdd(ctx, "sums", "n", d)
		if err != nil || sum != want {
			t.Fatalf("add %d: %d %v, want %d", d, sum, err, want)
		}
	}
}

func counterAbsentNotZero(t *testing.T, e *env) {
	b := e.shared(t)
	b.createCache("presence")
	c, ctx := b.dial(), stepCtx(t)
	if v, found, err := c.CounterGet(ctx, "presence", "never"); err != nil || found || v != 0 {
		t.Fatalf("unwritten counter: %d found=%v err=%v, want absent", v, found, err)
	}
	for _, d := range []int64{3, -3} {
		if _, err := c.CounterAdd(ctx, "presence", "zero", d); err != nil {
			t.Fatal(err)
		}
	}
	if v, found, err := c.CounterGet(ctx, "presence", "zero"); err != nil || !found || v != 0 {
		t.Fatalf("counter added back to 0: %d found=%v err=%v, want found 0", v, found, err)
	}
	// A value under the same key is no counter: the counter stays absent.
	if err := c.Put(ctx, "presence", "never", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.CounterGet(ctx, "presence", "never"); err != nil || found {
		t.Fatalf("counter beside a value: found=%v err=%v, want absent", found, err)
	}
}
