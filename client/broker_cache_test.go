package client

// Cache and watch tests of the SDK against a real in-process broker
// (startBroker, harness_test.go): values, counters, limits, watches and resumed
// watches.

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCache(t *testing.T) {
	b := startBroker(t, "")
	b.createCache("primary")
	c := b.dial()
	ctx := testCtx(t)

	if _, found, err := c.Get(ctx, "primary", "k"); err != nil || found {
		t.Fatalf("miss: found=%v err=%v", found, err)
	}
	if err := c.Put(ctx, "primary", "empty", nil, 0); err != nil {
		t.Fatal(err)
	}
	v, found, err := c.Get(ctx, "primary", "empty")
	if err != nil || !found || v == nil || len(v) != 0 {
		t.Fatalf("empty value: %q found=%v err=%v", v, found, err)
	}
	if err := c.Put(ctx, "primary", "k", []byte("v1"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if v, found, err := c.Get(ctx, "primary", "k"); err != nil || !found || string(v) != "v1" {
		t.Fatalf("get: %q %v %v", v, found, err)
	}
	removed, found, err := c.Delete(ctx, "primary", "k")
	if err != nil || !found || string(removed) != "v1" {
		t.Fatalf("delete: %q %v %v", removed, found, err)
	}
	if _, found, err := c.Delete(ctx, "primary", "k"); err != nil || found {
		t.Fatalf("second delete: found=%v err=%v", found, err)
	}
	if removed, found, err := c.Delete(ctx, "primary", "empty"); err != nil || !found || removed == nil || len(removed) != 0 {
		t.Fatalf("delete empty: %q %v %v", removed, found, err)
	}

	if sum, err := c.CounterAdd(ctx, "primary", "hits", 5); err != nil || sum != 5 {
		t.Fatalf("add: %d %v", sum, err)
	}
	if sum, err := c.CounterAdd(ctx, "primary", "hits", -7); err != nil || sum != -2 {
		t.Fatalf("add: %d %v", sum, err)
	}
	if sum, found, err := c.CounterGet(ctx, "primary", "hits"); err != nil || !found || sum != -2 {
		t.Fatalf("get counter: %d %v %v", sum, found, err)
	}
	if sum, found, err := c.CounterGet(ctx, "primary", "never"); err != nil || found || sum != 0 {
		t.Fatalf("fresh counter: %d found=%v %v", sum, found, err)
	}

	// A short TTL expires (poll: expiry is the broker's clock, so no fixed sleep is asserted).
	if err := c.Put(ctx, "primary", "ttl", []byte("x"), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for {
		_, found, err := c.Get(ctx, "primary", "ttl")
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("1 ms TTL never expired")
		case <-time.After(5 * time.Millisecond):
		}
	}

	_, _, err = c.Get(ctx, "nocache", "k")
	mustErrIs(t, err, ErrNotFound, ErrRefused)
	mustErrIs(t, c.Put(ctx, "nocache", "k", []byte("v"), 0), ErrNotFound)
	mustErrIs(t, c.Put(ctx, "primary", "k", []byte("v"), -time.Second), ErrInvalidArgument)

	// Pipelined requests from many goroutines on the pooled streams.
	errc := make(chan error, 32)
	for i := range 32 {
		go func() {
			key := fmt.Sprintf("p%d", i)
			if err := c.Put(ctx, "primary", key, []byte(key), 0); err != nil {
				errc <- err
				return
			}
			v, _, err := c.Get(ctx, "primary", key)
			if err == nil && !bytes.Equal(v, []byte(key)) {
				err = fmt.Errorf("key %s read %q", key, v)
			}
			errc <- err
		}()
	}
	for range 32 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

func TestWatchOnBroker(t *testing.T) {
	b := startBroker(t, "")
	b.createCache("settings")
	c := b.dial()
	ctx := testCtx(t)
	w, err := c.Watch(ctx, "settings", "cfg/", WatchOptions{Prefix: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "settings", "cfg/a", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(ctx, "settings", "other", []byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Delete(ctx, "settings", "cfg/a"); err != nil {
		t.Fatal(err)
	}
	ch, err := w.Next(ctx)
	if err != nil || ch.Key != "cfg/a" || ch.Op != ChangePut || string(ch.Value) != "1" {
		t.Fatalf("first change: %+v %v", ch, err)
	}
	ch2, err := w.Next(ctx)
	if err != nil || ch2.Key != "cfg/a" || ch2.Op != ChangeDelete || ch2.Value != nil || ch2.Offset <= ch.Offset {
		t.Fatalf("second change: %+v %v", ch2, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(ctx); err == nil {
		t.Fatal("Next after Close returned a change")
	}
	_, err = c.Watch(ctx, "nocache", "k", WatchOptions{})
	mustErrIs(t, err, ErrNotFound)
}

// Keys and values over the broker's limits are refused before sending with ErrTooLarge
// (a definite error, never ErrIndeterminate); values and keys at the limits are stored.
func TestCacheLimitsOnBroker(t *testing.T) {
	b := startBroker(t, "", "FELIX_AUTO_CREATE=true") // the first put creates the cache
	c := b.dial()
	ctx := testCtx(t)
	big := bytes.Repeat([]byte("v"), MaxCacheValueBytes)
	if err := c.Put(ctx, "kv", "k", big, 0); err != nil {
		t.Fatalf("put of a value at the limit: %v", err)
	}
	if v, found, err := c.Get(ctx, "kv", "k"); err != nil || !found || len(v) != MaxCacheValueBytes {
		t.Fatalf("get of the value at the limit: %d %v %v", len(v), found, err)
	}
	longKey := strings.Repeat("k", MaxCacheKeyBytes)
	if err := c.Put(ctx, "kv", longKey, []byte("x"), 0); err != nil {
		t.Fatalf("put under a key at the limit: %v", err)
	}
	tooLong := longKey + "k"
	checks := []error{
		c.Put(ctx, "kv", "k", append(big, 'v'), 0),
		c.Put(ctx, "kv", tooLong, nil, 0),
		c.Put(ctx, "kv", "", []byte("x"), 0),
	}
	_, _, err := c.Get(ctx, "kv", tooLong)
	checks = append(checks, err)
	_, _, err = c.Delete(ctx, "kv", tooLong)
	checks = append(checks, err)
	_, err = c.CounterAdd(ctx, "kv", tooLong, 1)
	checks = append(checks, err)
	_, _, err = c.CounterGet(ctx, "kv", tooLong)
	checks = append(checks, err)
	_, err = c.Watch(ctx, "kv", tooLong, WatchOptions{})
	checks = append(checks, err)
	for i, err := range checks {
		if !errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrIndeterminate) || (i != 2 && !errors.Is(err, ErrTooLarge)) {
			t.Errorf("check %d: %v, want ErrTooLarge / ErrInvalidArgument", i, err)
		}
	}
	if v, _, err := c.Get(ctx, "kv", "k"); err != nil || len(v) != MaxCacheValueBytes {
		t.Fatalf("the refused put changed the value: %d %v", len(v), err)
	}
}

// A watch resumes by itself across a broker restart from the last change's offset + 1 (no
// change repeated or lost), and WatchOptions.From replays the log from an offset.
func TestWatchResumeOnBroker(t *testing.T) {
	addr := freeUDPAddr(t)
	// The first watch creates the cache (durable, one shard: the catalog's defaults).
	env := append(writeCert(t), "FELIX_QUIC_BIND="+addr, "FELIX_AUTO_CREATE=true")
	b := startBroker(t, "", env...)
	c := b.dial(WithReconnectBackoff(10*time.Millisecond, 200*time.Millisecond))
	ctx := testCtx(t)
	w, err := c.Watch(ctx, "kv", "k", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if err := c.Put(ctx, "kv", "k", []byte("1"), 0); err != nil {
		t.Fatal(err)
	}
	first, err := w.Next(ctx)
	if err != nil || string(first.Value) != "1" {
		t.Fatalf("first change: %+v %v", first, err)
	}
	b.stop()
	b2 := startBroker(t, b.dataDir, env...)
	// Changes made while the watch is away: a second client writes them.
	c2 := b2.dial()
	if err := c2.Put(ctx, "kv", "k", []byte("2"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.Delete(ctx, "kv", "k"); err != nil {
		t.Fatal(err)
	}
	ch, err := w.Next(ctx)
	if err != nil || ch.Op != ChangePut || string(ch.Value) != "2" || ch.Offset != first.Offset+1 {
		t.Fatalf("after the restart: %+v %v (first at %d)", ch, err, first.Offset)
	}
	if ch, err = w.Next(ctx); err != nil || ch.Op != ChangeDelete || ch.Offset != first.Offset+2 {
		t.Fatalf("delete after the restart: %+v %v", ch, err)
	}
	// From replays the log.
	w2, err := c2.Watch(ctx, "kv", "k", WatchOptions{From: FromOffset(first.Offset)})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close(ctx)
	for i, want := range []string{"1", "2"} {
		ch, err := w2.Next(ctx)
		if err != nil || string(ch.Value) != want || ch.Offset != first.Offset+uint64(i) {
			t.Fatalf("replayed change %d: %+v %v", i, ch, err)
		}
	}
	// An offset past the log's end is a definite refusal.
	_, err = c2.Watch(ctx, "kv", "k", WatchOptions{From: FromOffset(first.Offset + 100)})
	mustErrIs(t, err, ErrMalformed, ErrRefused)
}
