package client

// Cache and watch rules against the fake broker (fake_test.go): which cache
// requests are re-sent after a lost answer (cacheAnswer), the attempt bound, and
// watches with their resume rules.

import (
	"errors"
	"sync"
	"testing"
	"time"

	"felix/proto"
)

func cacheAnswer(x *exchange, m proto.Message) {
	switch m := m.(type) {
	case *proto.CachePut:
		x.reply(&proto.CacheOK{RequestID: *m.RequestID})
	case *proto.CacheGet:
		x.reply(&proto.CacheValue{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: []byte("v"), RequestID: m.RequestID})
	case *proto.CacheDelete:
		x.reply(&proto.CacheDeleted{TenantID: m.TenantID, Namespace: m.Namespace, Cache: m.Cache, Key: m.Key, Value: []byte("old"), RequestID: m.RequestID})
	case *proto.CounterAdd:
		x.reply(&proto.CounterValue{Key: m.Key, Value: m.Delta, RequestID: m.RequestID})
	case *proto.CounterGet:
		x.reply(&proto.CounterValue{Key: m.Key, Value: 9, RequestID: m.RequestID})
	}
}

// seeds/internal-protocol.txt, "Forwarded cache operation": a lost answer to a write is
// reported, never re-sent; Get and Delete are re-sent.
func TestCacheRetryRules(t *testing.T) {
	fb := startFake(t, dropFirst(cacheAnswer))
	c := fb.dial()
	ctx := testCtx(t)

	err := c.Put(ctx, "c", "k", []byte("v"), time.Second)
	mustErrIs(t, err, ErrIndeterminate)
	if n := fb.count(proto.TypeCachePut); n != 1 {
		t.Fatalf("Put sent %d times, want 1 (never re-sent)", n)
	}
	if _, err := c.CounterAdd(ctx, "c", "n", 1); !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("CounterAdd with a lost answer: %v", err)
	}
	if n := fb.count(proto.TypeCounterAdd); n != 1 {
		t.Fatalf("CounterAdd sent %d times, want 1", n)
	}
	v, found, err := c.Get(ctx, "c", "k")
	if err != nil || !found || string(v) != "v" {
		t.Fatalf("Get after a lost answer: %q %v %v", v, found, err)
	}
	if n := fb.count(proto.TypeCacheGet); n != 2 {
		t.Fatalf("Get sent %d times, want 2 (re-sent once)", n)
	}
	if old, found, err := c.Delete(ctx, "c", "k"); err != nil || !found || string(old) != "old" {
		t.Fatalf("Delete after a lost answer: %q %v %v", old, found, err)
	}
	if sum, found, err := c.CounterGet(ctx, "c", "n"); err != nil || !found || sum != 9 {
		t.Fatalf("CounterGet after a lost answer: %d %v %v", sum, found, err)
	}
	// The re-sends use fresh request ids.
	gets := fb.messages(proto.TypeCacheGet)
	if *gets[0].(*proto.CacheGet).RequestID == *gets[1].(*proto.CacheGet).RequestID {
		t.Fatal("re-sent Get reused its request id")
	}
	// Put succeeds once the connection behaves.
	if err := c.Put(ctx, "c", "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	put := fb.messages(proto.TypeCachePut)[1].(*proto.CachePut)
	if put.TTLMs != nil {
		t.Fatalf("ttl 0 must travel as null, got %d", *put.TTLMs)
	}
}

// Every attempt lost: a safe request gives up after WithMaxAttempts.
func TestSafeRetryBounded(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) { x.drop() })
	c := fb.dial(WithMaxAttempts(3))
	_, _, err := c.Get(testCtx(t), "c", "k")
	mustErrIs(t, err, ErrIndeterminate)
	if n := fb.count(proto.TypeCacheGet); n != 3 {
		t.Fatalf("Get sent %d times, want 3", n)
	}
}

func TestWatch(t *testing.T) {
	fb := startFake(t, func(x *exchange, m proto.Message) {
		w, ok := m.(*proto.CacheWatch)
		if !ok {
			return
		}
		// The event stream may arrive before cache_watching (spec §1.3): send it first.
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: 9001})
		frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: 9001, Key: "cfg/a", Op: proto.CacheChangePut, Value: []byte("1"), Offset: 77})
		frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: 9001, Key: "cfg/a", Op: proto.CacheChangeDelete, Offset: 78})
		_, _ = es.Write(frames)
		x.reply(&proto.CacheWatching{RequestID: w.RequestID, WatchID: 9001})
	})
	c := fb.dial()
	ctx := testCtx(t)
	w, err := c.Watch(ctx, "primary", "cfg/", WatchOptions{Prefix: true})
	if err != nil {
		t.Fatal(err)
	}
	req := fb.messages(proto.TypeCacheWatch)[0].(*proto.CacheWatch)
	if req.Prefix == nil || *req.Prefix != "cfg/" || req.Key != nil {
		t.Fatalf("watch request %+v", req)
	}
	ch, err := w.Next(ctx)
	if err != nil || ch.Key != "cfg/a" || ch.Op != ChangePut || string(ch.Value) != "1" || ch.Offset != 77 {
		t.Fatalf("change: %+v %v", ch, err)
	}
	ch, err = w.Next(ctx)
	if err != nil || ch.Op != ChangeDelete || ch.Value != nil || ch.Offset != 78 {
		t.Fatalf("change: %+v %v", ch, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for fb.count(proto.TypeCacheUnwatch) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("cache_unwatch never arrived")
		case <-time.After(time.Millisecond):
		}
	}
}

// A watch lost before its first change and without WatchOptions.From cannot know where to
// resume: Next reports ErrIndeterminate. One that saw a change re-sends cache_watch with
// from_offset = last offset + 1 when its event stream ends; Close ends Next with ErrClosed.
func TestWatchResumeRules(t *testing.T) {
	var mu sync.Mutex
	watches := 0
	fb := startFake(t, func(x *exchange, m proto.Message) {
		w, ok := m.(*proto.CacheWatch)
		if !ok {
			return
		}
		mu.Lock()
		watches++
		n := watches
		mu.Unlock()
		es, err := x.conn.OpenUniStream()
		if err != nil {
			return
		}
		id := uint64(100 + n)
		frames := proto.AppendMessage(nil, &proto.EventStreamHello{SubscriptionID: id})
		x.reply(&proto.CacheWatching{RequestID: w.RequestID, WatchID: id})
		switch n {
		case 1: // the "nofrom" watch: lost before any change
			_, _ = es.Write(frames)
			_ = es.Close()
		case 2: // the "k" watch: one change, then its event stream ends
			frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: id, Key: "k", Op: proto.CacheChangePut, Value: []byte("1"), Offset: 41})
			_, _ = es.Write(frames)
			_ = es.Close()
		case 3: // the resumed "k" watch
			if w.FromOffset == nil || *w.FromOffset != 42 {
				x.fb.t.Errorf("resumed watch from_offset %v, want 42", w.FromOffset)
			}
			frames = proto.AppendMessage(frames, &proto.CacheChange{WatchID: id, Key: "k", Op: proto.CacheChangeDelete, Offset: 42})
			_, _ = es.Write(frames)
		}
	})
	c := fb.dial()
	ctx := testCtx(t)
	w1, err := c.Watch(ctx, "c", "nofrom", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w1.Next(ctx); !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("watch lost before its first change: %v, want ErrIndeterminate", err)
	}
	w2, err := c.Watch(ctx, "c", "k", WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ch, err := w2.Next(ctx); err != nil || ch.Offset != 41 {
		t.Fatalf("first change: %+v %v", ch, err)
	}
	if ch, err := w2.Next(ctx); err != nil || ch.Offset != 42 || ch.Op != ChangeDelete {
		t.Fatalf("change after the resume: %+v %v", ch, err)
	}
	done := make(chan error, 1)
	go func() { _, err := w2.Next(ctx); done <- err }()
	if err := w2.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
	if _, err := c.Watch(ctx, "c", "", WatchOptions{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("empty key: %v", err)
	}
}
